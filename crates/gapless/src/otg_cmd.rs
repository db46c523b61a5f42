//! `gapless otg`: the OTG front door's work without a server. `frames` prints the first
//! frames each flow of a config would send (what `set_config` would refuse is refused the same
//! way, with its path), so that a script's headers can be read before any port is touched.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Subcommand;
use gapless_core::packet::whole_frame::hex_of;
use serde_json::{json, Value};

#[derive(Subcommand)]
pub enum OtgCmd {
    /// Print each flow's first frames (hex, as JSON) as `set_config` would plan them, or the
    /// refusal it would give, naming the field's path. Sends nothing.
    Frames {
        /// An OTG config (JSON, as snappi's `serialize()` writes it), or - for stdin.
        config: PathBuf,
        /// Frames per flow (1 to 1000).
        #[arg(long, default_value_t = 1)]
        count: usize,
    },
}

pub fn cmd_otg(cmd: OtgCmd) -> Result<i32> {
    match cmd {
        OtgCmd::Frames { config, count } => frames(&config, count),
    }
}

fn frames(config: &PathBuf, count: usize) -> Result<i32> {
    if !(1..=1000).contains(&count) {
        return Err(anyhow!("--count {count}: give 1 to 1000 frames per flow"));
    }
    let cfg = read_config(config)?;
    let p = gapless_otg::config::preview::preview(&cfg, count).map_err(|e| anyhow!("{}", e.0))?;
    let flows: Vec<Value> = p
        .flows
        .iter()
        .map(|f| json!({ "name": f.name, "frames": f.frames.iter().map(|b| hex_of(b)).collect::<Vec<_>>() }))
        .collect();
    println!("{}", json!({ "flows": flows, "warnings": p.warnings }));
    Ok(0)
}

fn read_config(path: &PathBuf) -> Result<Value> {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the config from stdin")?;
    } else {
        text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: not a JSON config ({e}); give what snappi's serialize() writes",
            path.display()
        )
    })
}
