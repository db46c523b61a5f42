//! Meter cost: ns per frame of the core meter (classify + every per-stream metric), on 64-byte
//! signed UDP frames from 4 interleaved streams, in memory (no IO). Also the classifier
//! alone. `cargo run --release -p gapless-core --example meter_cost [frames] [--meter-only]`
//! Prints one line per run: `meter_ns_per_frame=… classify_ns_per_frame=…`; with
//! `--meter-only`, the meter's figure alone (for instruction counts: `bench/meter_cost.sh`).

use std::hint::black_box;
use std::time::Instant;

use etherparse::PacketBuilder;
use gapless_core::meter::{classify, Meter, MeterConfig};
use gapless_core::packet::signature::Signature;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    // 1024 distinct frames (4 streams x 256 sequence numbers), patched per use.
    let mut frames = Vec::new();
    for i in 0..1024u32 {
        let mut payload = vec![0u8; 18];
        Signature {
            stream: (i % 4) as u16,
            seq: i / 4,
            tx_ns: 0,
        }
        .write(&mut payload[2..]);
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(1000, 2000)
            .write(&mut f, &payload)
            .unwrap();
        frames.push(f);
    }
    let len = frames[0].len();
    let sig_at = len - 16;
    let mut meter = Meter::new(MeterConfig {
        default_target_pps: Some(1e6),
        ..Default::default()
    });
    let t0 = Instant::now();
    for k in 0..n {
        let f = &mut frames[(k % 1024) as usize];
        // sequence number k / 4 per stream, TX 1.5 µs before RX, jitter of a few ns
        let ts = 1_000_000_000 + k * 250 + (k * 7919 % 13);
        f[sig_at + 4..sig_at + 8].copy_from_slice(&((k / 4) as u32).to_be_bytes());
        f[sig_at + 8..sig_at + 16].copy_from_slice(&(ts - 1500 - (k % 17)).to_be_bytes());
        meter.on_frame(ts, f, 60);
    }
    let meter_ns = t0.elapsed().as_nanos() as f64 / n as f64;
    black_box(meter.report());
    if std::env::args().any(|a| a == "--meter-only") {
        // For instruction counts of the meter alone.
        return println!("frames={n} meter_ns_per_frame={meter_ns:.1}");
    }
    let t0 = Instant::now();
    let mut acc = 0usize;
    for k in 0..n {
        let c = classify(&frames[(k % 1024) as usize]);
        acc += matches!(c, gapless_core::meter::Class::Signed(_)) as usize;
    }
    let classify_ns = t0.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(acc as u64, n);
    println!("frames={n} meter_ns_per_frame={meter_ns:.1} classify_ns_per_frame={classify_ns:.1}");
}
