//! Sharing a stream out over send loops: the phase-shifted CBR split reproduces the whole
//! schedule; Poisson splits by default; placement and the split's errors.

use gapless_core::spec::files::NoFiles;
use gapless_core::spec::SplitKind;
use gapless_core::{CompileCtx, Profile, ProfileSpec, StreamGen};

fn compile(toml: &str) -> Result<Profile, String> {
    let spec = ProfileSpec::from_toml(toml, "p.toml").map_err(|e| e.to_string())?;
    spec.compile(&CompileCtx {
        link_speed_bps: None,
        files: &NoFiles,
    })
    .map_err(|e| e.to_string())
}

/// (departure time, sequence number) of every frame of a stream part.
fn departures(cfg: gapless_core::StreamConfig) -> Vec<(u64, u32)> {
    let (lanes, lane) = (cfg.lanes, cfg.lane);
    let mut g = StreamGen::new(cfg);
    let mut out = Vec::new();
    let mut k = 0u32;
    while let Some(d) = g.next_departure() {
        for _ in 0..d.frames {
            out.push((d.at_ns, k.wrapping_mul(lanes).wrapping_add(lane)));
            let mut buf = [0u8; 2048];
            g.build(&mut buf, 0);
            k += 1;
        }
        g.advance(64 * u64::from(d.frames));
    }
    out
}

#[test]
fn phase_split_cbr_parts_merge_into_the_whole_schedule() {
    // 3 parts of a 30 001-frame CBR at 7 kpps (a gap of 142 857.14 ns: not a whole number).
    let p = compile(
        "[[stream]]\nsplit = \"phase\"\n[stream.timing]\nrate_pps = 7000\ncount = 30_001\nstart_offset_ns = 500\n",
    )
    .unwrap();
    let s = &p.streams[0];
    assert_eq!(s.split, SplitKind::Phase);
    assert!(s.splits_over(3) && !s.splits_over(1));
    let whole = departures(s.clone());
    let mut merged: Vec<(u64, u32)> = s.split(3).into_iter().flat_map(departures).collect();
    merged.sort();
    assert_eq!(merged.len(), whole.len());
    for (i, (m, w)) in merged.iter().zip(&whole).enumerate() {
        // Same frame (sequence number), same departure within 1 ns of rounding.
        assert_eq!(m.1, w.1, "frame {i}");
        assert!(m.0.abs_diff(w.0) <= 1, "frame {i}: {} vs {}", m.0, w.0);
    }
    // A duration ends every part where the whole stream ends.
    let p = compile("[[stream]]\nsplit = \"phase\"\n[stream.timing]\nrate_pps = 1000\nduration_s = 1\n").unwrap();
    let n: usize = p.streams[0].split(4).into_iter().map(|c| departures(c).len()).sum();
    assert_eq!(n, 1000);
}

#[test]
fn what_splits_by_default_and_what_stays_whole() {
    let p = compile(
        "[[stream]]\n[stream.timing]\nrate_pps = 1000\npattern = \"poisson\"\n\
         [[stream]]\n[stream.timing]\nrate_pps = 1000\n\
         [[stream]]\nsplit = \"none\"\n[stream.timing]\nrate_pps = 1000\npattern = \"poisson\"\n\
         [[stream]]\ncore = 1\n[stream.timing]\nrate_pps = 1000\npattern = \"poisson\"\n",
    )
    .unwrap();
    let split: Vec<bool> = p.streams.iter().map(|s| s.splits_over(2)).collect();
    assert_eq!(split, [true, false, false, false]);
    assert_eq!(p.streams[3].core, Some(1));
    // Poisson parts keep no phase: each starts at the stream's offset, with its own seed.
    let parts = p.streams[0].split(2);
    assert_eq!(parts[0].start_offset_ns, parts[1].start_offset_ns);
    assert_ne!(parts[0].seed, parts[1].seed);
}

#[test]
fn phase_split_errors_name_the_fix() {
    let e = compile("[[stream]]\nsplit = \"phase\"\n[stream.timing]\nrate_pps = 1000\npattern = \"poisson\"\n")
        .unwrap_err();
    assert!(e.contains("stream[0].split") && e.contains("for CBR streams"), "{e}");
    let e = compile("[[stream]]\nsplit = \"phase\"\ncore = 0\n[stream.timing]\nrate_pps = 1000\n").unwrap_err();
    assert!(e.contains("keep one of core and split"), "{e}");
    let e = compile(
        "[[stream]]\nsplit = \"phase\"\nsize = { kind = \"uniform\", min = 64, max = 1518 }\n[stream.timing]\nrate_bps_l1 = 1e8\n",
    )
    .unwrap_err();
    assert!(e.contains("rate_pps"), "{e}");
    let e = compile("[[stream]]\nsplit = \"half\"\n[stream.timing]\nrate_pps = 1000\n").unwrap_err();
    assert!(e.contains("phase") && e.contains("none"), "{e}");
}
