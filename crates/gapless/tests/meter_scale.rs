//! Meter scale: every one of the 65 536 signature stream ids in one capture, metered in
//! bounded memory. In its own test binary: the child's peak RSS (from wait4) includes the
//! memory of the process it was spawned from, so this one stays small.

mod common;
use common::*;

/// A 60-byte UDP frame whose payload ends with a gapless signature.
fn signed_frame(stream: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
    let mut payload = vec![0u8; 2];
    payload.extend_from_slice(&[0x67, 0x4c]);
    payload.extend_from_slice(&stream.to_be_bytes());
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.extend_from_slice(&tx_ns.to_be_bytes());
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(1024, 1024)
        .write(&mut f, &payload)
        .unwrap();
    f
}

#[test]
fn every_stream_id_is_metered_in_under_a_gigabyte() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    let mut frames = Vec::new();
    for seq in 0..3u32 {
        for id in 0..=u16::MAX {
            let t = t0 + (u64::from(seq) * 65_536 + u64::from(id)) * 1_000;
            frames.push((t + 500, signed_frame(id, seq, t)));
        }
    }
    let f = dir.path().join("ids.pcap");
    std::fs::write(&f, pcap_of_frames(&frames)).unwrap();
    let j = dir.path().join("ids.json");
    let (code, t, rss) = gapless_rss(&["analyze", f.to_str().unwrap(), "--json", j.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{t}");
    assert!(
        rss < 1024 * 1024,
        "expected under 1 GB RSS for 65 536 streams, got {} MB",
        rss / 1024
    );
    let r = read_json(&j);
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 65_536);
    assert!(
        streams.iter().all(|s| s["rx_frames"] == 3 && s["seq"]["lost"] == 0),
        "every stream: 3 frames, none lost"
    );
    eprintln!("65 536 streams metered in {} MB", rss / 1024);
}
