//! The plan of a run: which send loop sends which stream, or which part of it.
//!
//! Pure: the cores are given, nothing is pinned or started here. The engine runs one loop per
//! [`LoopPlan`] and merges their counters back per stream with [`Plan::maps`].

use thiserror::Error;

use crate::profile::model::{Profile, StreamConfig};
use crate::spec::SplitKind;
use crate::timing::departures::Pattern;

/// What one send loop sends.
#[derive(Debug, Clone)]
pub struct LoopPlan {
    /// The core the loop is pinned to (None: not pinned).
    pub core: Option<usize>,
    /// The streams (or stream parts) this loop sends.
    pub profile: Profile,
    /// `map[i]`: the index in the whole profile of this loop's stream `i`.
    pub map: Vec<usize>,
}

/// Every loop of a run, and where each stream of the profile went.
#[derive(Debug, Clone)]
pub struct Plan {
    pub loops: Vec<LoopPlan>,
    /// Per stream of the profile: the cores of the loops it runs on (empty when unpinned).
    pub stream_cores: Vec<Vec<usize>>,
    /// The whole profile, with `lanes` set on the split streams (the meter's targets).
    pub profile: Profile,
}

impl Plan {
    /// Each loop's map from its streams to the profile's.
    pub fn maps(&self) -> Vec<Vec<usize>> {
        self.loops.iter().map(|l| l.map.clone()).collect()
    }
}

/// A plan that cannot be made. Each says what is wrong; front ends add their own hints.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A stream is placed (`core = N`) on a core no send loop runs on.
    #[error("stream {stream:?} is placed on core {core} (its `core` key), but the send loops run on {}", loops_text(.loops))]
    StreamCoreNotLooped {
        stream: String,
        core: usize,
        loops: Vec<usize>,
    },
    /// A phase split was asked of a stream whose gaps depend on each frame's size.
    #[error("stream {stream:?} has a bit rate and frames of several sizes, so its gaps depend on each frame and cannot be phase-shifted")]
    PhaseSplitNeedsFixedGap { stream: String },
    /// The same core twice.
    #[error("a core is listed twice: two send loops on one core would stall each other")]
    DuplicateCore,
}

fn loops_text(loops: &[usize]) -> String {
    if loops.is_empty() {
        "one unpinned loop".to_string()
    } else {
        format!("cores {loops:?}")
    }
}

/// The send loops' cores: those given, else one per core the profile places streams on,
/// else one loop on `core` (None: the engine picks).
pub fn loop_cores(profile: &Profile, cores: &[usize], core: Option<usize>) -> Vec<Option<usize>> {
    let placed: std::collections::BTreeSet<usize> = profile.streams.iter().filter_map(|s| s.core).collect();
    if !cores.is_empty() {
        cores.iter().map(|&c| Some(c)).collect()
    } else if core.is_none() && !placed.is_empty() {
        placed.into_iter().map(Some).collect()
    } else {
        vec![core]
    }
}

/// Marks every CBR stream that is free to move as phase-split (`--split-cbr`).
pub fn split_all_cbr(profile: &mut Profile) -> Result<(), PlanError> {
    for s in profile.streams.iter_mut() {
        if matches!(s.pattern, Pattern::Cbr) && s.core.is_none() && s.split == SplitKind::Auto {
            if s.gap_depends_on_size() {
                return Err(PlanError::PhaseSplitNeedsFixedGap { stream: s.name.clone() });
            }
            s.split = SplitKind::Phase;
        }
    }
    Ok(())
}

/// Shares the profile's streams out over one loop per entry of `cores`. Streams that split
/// (Poisson, or CBR with `split = "phase"`) go to every loop at rate/k; the others stay whole,
/// on their `core`'s loop or round robin: interleaved CBR senders would collide and make
/// bursts.
pub fn plan(mut profile: Profile, cores: &[Option<usize>]) -> Result<Plan, PlanError> {
    let k = cores.len().max(1);
    check_cores(&profile, cores)?;
    let mut parts: Vec<(Vec<StreamConfig>, Vec<usize>)> = vec![(Vec::new(), Vec::new()); k];
    let mut stream_cores = Vec::with_capacity(profile.streams.len());
    let mut whole = 0;
    for (i, s) in profile.streams.iter_mut().enumerate() {
        let on: Vec<usize> = if s.splits_over(k) {
            s.lanes = k as u32;
            for (w, part) in s.split(k as u32).into_iter().enumerate() {
                parts[w].0.push(part);
                parts[w].1.push(i);
            }
            (0..k).collect()
        } else {
            let w = match s.core {
                Some(c) => cores.iter().position(|&x| x == Some(c)).expect("checked above"),
                None => {
                    whole += 1;
                    (whole - 1) % k
                }
            };
            parts[w].0.push(s.clone());
            parts[w].1.push(i);
            vec![w]
        };
        stream_cores.push(on.iter().filter_map(|&w| cores.get(w).copied().flatten()).collect());
    }
    let loops = parts
        .into_iter()
        .enumerate()
        .map(|(w, (streams, map))| {
            let mut p = profile.clone();
            p.streams = streams;
            LoopPlan {
                core: cores.get(w).copied().flatten(),
                profile: p,
                map,
            }
        })
        .collect();
    Ok(Plan {
        loops,
        stream_cores,
        profile,
    })
}

/// Refuses a core listed twice, and a stream placed on a core no loop runs on.
pub fn check_cores(profile: &Profile, cores: &[Option<usize>]) -> Result<(), PlanError> {
    let pinned: Vec<usize> = cores.iter().flatten().copied().collect();
    let unique: std::collections::BTreeSet<_> = pinned.iter().collect();
    if cores.len() > 1 && unique.len() < cores.len() {
        return Err(PlanError::DuplicateCore);
    }
    match profile
        .streams
        .iter()
        .find(|s| s.core.is_some_and(|c| !cores.contains(&Some(c))))
    {
        Some(s) => Err(PlanError::StreamCoreNotLooped {
            stream: s.name.clone(),
            core: s.core.unwrap_or_default(),
            loops: pinned,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompileCtx, ProfileSpec};

    fn profile(toml: &str) -> Profile {
        struct NoFiles;
        impl crate::spec::files::FileLoader for NoFiles {
            fn load(&self, p: &str) -> Result<String, String> {
                Err(p.to_string())
            }
        }
        ProfileSpec::from_toml(toml, "test")
            .unwrap()
            .compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles,
            })
            .unwrap()
    }

    const THREE: &str = r#"
[[stream]]
name = "a"
[stream.timing]
rate_pps = 1000
[[stream]]
name = "p"
[stream.timing]
rate_pps = 3000
pattern = "poisson"
[[stream]]
name = "b"
[stream.timing]
rate_pps = 1000
"#;

    #[test]
    fn whole_streams_go_round_robin_and_poisson_splits_over_every_loop() {
        let p = plan(profile(THREE), &[Some(0), Some(1)]).unwrap();
        assert_eq!(p.loops.len(), 2);
        let names = |w: usize| -> Vec<String> { p.loops[w].profile.streams.iter().map(|s| s.name.clone()).collect() };
        assert_eq!(names(0), ["a", "p"]);
        assert_eq!(names(1), ["p", "b"]);
        assert_eq!(p.maps(), vec![vec![0, 1], vec![1, 2]]);
        assert_eq!(p.stream_cores, vec![vec![0], vec![0, 1], vec![1]]);
        assert_eq!(p.profile.streams[1].lanes, 2);
        let part = &p.loops[1].profile.streams[0];
        assert_eq!((part.lane, part.lanes, part.target_pps), (1, 2, 1500.0));
    }

    #[test]
    fn one_unpinned_loop_takes_everything_whole() {
        let p = plan(profile(THREE), &[None]).unwrap();
        assert_eq!(p.loops.len(), 1);
        assert_eq!(p.loops[0].map, vec![0, 1, 2]);
        assert!(p.stream_cores.iter().all(Vec::is_empty));
        assert_eq!(p.profile.streams[1].lanes, 1);
    }

    #[test]
    fn a_stream_placed_off_the_loops_and_a_core_twice_are_refused() {
        let mut prof = profile(THREE);
        prof.streams[0].core = Some(5);
        let e = plan(prof.clone(), &[Some(0), Some(1)]).unwrap_err();
        assert_eq!(
            e,
            PlanError::StreamCoreNotLooped {
                stream: "a".into(),
                core: 5,
                loops: vec![0, 1]
            }
        );
        assert_eq!(loop_cores(&prof, &[], None), vec![Some(5)]);
        let e = plan(profile(THREE), &[Some(1), Some(1)]).unwrap_err();
        assert_eq!(e, PlanError::DuplicateCore);
    }

    #[test]
    fn split_cbr_marks_cbr_streams_phase_and_shifts_each_part_one_gap() {
        let mut prof = profile(THREE);
        split_all_cbr(&mut prof).unwrap();
        let p = plan(prof, &[Some(0), Some(1)]).unwrap();
        let a1 = &p.loops[1].profile.streams[0];
        assert_eq!((a1.name.as_str(), a1.lane, a1.start_offset_ns), ("a", 1, 1_000_000));
    }
}
