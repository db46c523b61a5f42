//! The frames a config's flows would send, without sending them (sans IO): each flow's
//! first frames as the engine builds them, for `gapless otg frames` and the tests that read
//! a model field at its place (Scapy, python/tests/test_otg_model_wire.py). A device flow whose
//! destination MAC is its gateway's carries the placeholder the engine replaces once the
//! gateway resolves.

use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec, StreamGen};
use serde_json::Value;

use super::{plan, Invalid};

/// A flow's first frames.
#[derive(Debug, Clone)]
pub struct FlowFrames {
    pub name: String,
    pub frames: Vec<Vec<u8>>,
}

/// What [`preview`] gives: every flow's first frames, and the warnings `set_config` would.
#[derive(Debug, Clone)]
pub struct Preview {
    pub flows: Vec<FlowFrames>,
    pub warnings: Vec<String>,
}

/// The first `count` frames of every flow of `cfg`, or the refusal `set_config` would give.
pub fn preview(cfg: &Value, count: usize) -> Result<Preview, Invalid> {
    let p = plan(cfg)?;
    let mut flows = Vec::new();
    for g in &p.groups {
        let spec: ProfileSpec = serde_json::from_value(g.profile.clone()).map_err(|e| {
            Invalid(format!(
                "the planned profile does not read back ({e}): a bug, please report it"
            ))
        })?;
        let ctx = CompileCtx {
            link_speed_bps: None,
            files: &NoFiles,
        };
        let prof = spec.compile(&ctx).map_err(|e| Invalid(e.to_string()))?;
        for (name, stream) in g.flows.iter().zip(&prof.streams) {
            flows.push(FlowFrames {
                name: name.clone(),
                frames: first_frames(stream.clone(), count),
            });
        }
    }
    Ok(Preview {
        flows,
        warnings: p.warnings,
    })
}

fn first_frames(stream: gapless_core::StreamConfig, count: usize) -> Vec<Vec<u8>> {
    let mut g = StreamGen::new(stream);
    let mut buf = vec![0u8; 65_536];
    (0..count)
        .map(|_| {
            let len = g.build(&mut buf, 0);
            buf[..len].to_vec()
        })
        .collect()
}
