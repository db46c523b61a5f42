//! The shortest complete use of the run API: a two-stream run on the null backend, three
//! live snapshots, an early stop, and the report's per-stream counts.
//!
//! `cargo run -p gapless-engine --example run_api`

use std::time::Duration;

use gapless_core::ProfileSpec;
use gapless_engine::{Pacing, ProfileSource, Run, RunSpec, TxTarget};

const PROFILE: &str = r#"
[[stream]]
name = "slow"
[stream.timing]
rate_pps = 1000
[[stream]]
name = "fast"
[stream.timing]
rate_pps = 50000
"#;

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profile = ProfileSource {
        spec: ProfileSpec::from_toml(PROFILE, "run_api example")?,
        dir: ".".into(),
        label: "run_api example".into(),
    };
    let spec = RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(profile, TxTarget::Null)
    };
    let run = Run::start(spec)?;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200));
        let s = run.snapshot();
        let each: Vec<String> = s
            .streams
            .iter()
            .map(|st| format!("{} sent {} ({:.0} pps)", st.name, st.tx.sent, st.tx.rate_pps))
            .collect();
        println!("snapshot at {:.2} s: {}", s.elapsed_s, each.join(", "));
    }
    run.stop();
    let report = run.wait()?;
    for st in &report.result.streams {
        println!("report: {} sent {}", st.name, st.sent_frames);
    }
    println!(
        "interrupted: {}, verdict held: {:?}",
        report.interrupted(),
        report.result.verdict.held
    );
    Ok(())
}
