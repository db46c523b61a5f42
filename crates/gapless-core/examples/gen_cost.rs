//! Generator cost without the engine binary: the null backend's loop (the scheduler serving
//! in-order chunks of 64 frames built into memory), ns per frame for a profile file.
//! A quick loop for work on the field engine; `bench/engine.sh` measures the real binary.
//! `cargo run --release -p gapless-core --example gen_cost PROFILE.toml [frames]`

use std::time::Instant;

use gapless_core::generator::scheduler::{ChunkBufs, Scheduler, Sent};
use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: gen_cost PROFILE.toml [frames]");
    let frames: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000_000);
    let text = std::fs::read_to_string(&path).expect("the profile");
    let spec = ProfileSpec::from_toml(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    let ctx = CompileCtx {
        link_speed_bps: None,
        files: &NoFiles,
    };
    let profile = spec.compile(&ctx).unwrap_or_else(|e| panic!("{e}"));
    let mut sched = Scheduler::new(&profile, false, 1).chunk_in_order();
    let mut out = vec![vec![0u8; 16_384]; 64];
    let mut bufs = ChunkBufs::with_capacity(64);
    let (mut sent, mut check) = (0u64, 0u8);
    let t0 = Instant::now();
    while sent < frames {
        let Some(due) = sched.next_due(|| 0) else { break };
        let _ = sched.serve(due, &mut out, &mut bufs, 64, |c| -> Result<Sent, ()> {
            for (i, l) in c.lens.iter().enumerate() {
                check ^= c.out[i][l - 1];
            }
            sent += c.lens.len() as u64;
            Ok(Sent {
                t_send: 0,
                when: 0,
                left: c.lens.len(),
                timed: false,
                warmup: 0,
            })
        });
    }
    let ns = t0.elapsed().as_nanos() as f64;
    println!("ns_per_frame={:.2} frames={sent} check={check}", ns / sent as f64);
}
