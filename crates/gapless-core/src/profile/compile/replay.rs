//! pcap replay: a stream whose frames and departure times come from a capture. The core
//! reads nothing itself: the front end's [`crate::spec::files::FileLoader`] opens the capture as a
//! [`CaptureSource`](crate::spec::files::CaptureSource), which hands out streaming readers, so a file of any length replays in
//! constant memory.
//!
//! Timing: the file's own (each frame at its timestamp relative to the first, divided by
//! `speed`), or a fixed rate when the stream's timing gives one. Loops are continuous: loop
//! k+1 starts one mean gap after loop k's last frame.

use crate::profile::model::Replay;
use crate::spec::files::CaptureStats;

/// Compiles a `[stream.replay]`: scans the capture (through `files`) and makes the stream's
/// one variant, whose sizes are the capture's range. Returns the variant and the replay;
/// `fixed_rate` is whether the stream's timing gives a rate.
pub fn compile(
    s: &crate::spec::StreamSpec,
    r: &crate::spec::ReplaySpec,
    path: &str,
    seed: u64,
    files: &dyn crate::spec::files::FileLoader,
) -> Result<(crate::packet::variant::Variant, Replay), crate::spec::error::ProfileError> {
    use crate::spec::error::ProfileError;
    let rpath = format!("{path}.replay");
    check_keys(s, path)?;
    let speed = r.speed.unwrap_or(1.0);
    if !(speed.is_finite() && speed > 0.0) {
        return Err(ProfileError::invalid(
            format!("{rpath}.speed"),
            format!("speed {speed} is not above 0"),
            "use a speed factor above 0 (2 = twice as fast)",
        ));
    }
    let t = &s.timing;
    let fixed_rate = [t.rate_pps, t.rate_bps_l1, t.rate_bps_l2, t.rate_pct]
        .iter()
        .any(Option::is_some);
    if fixed_rate && r.speed.is_some() {
        return Err(ProfileError::invalid(
            format!("{rpath}.speed"),
            "speed scales the file's timing, but the stream gives a rate",
            "keep one: a rate key (fixed rate) or speed (file timing)",
        ));
    }
    let (source, stats) = files.capture(&r.file).map_err(|e| {
        ProfileError::invalid(
            format!("{rpath}.file"),
            format!("cannot replay {:?}: {e}", r.file),
            "give a pcap or pcapng capture of Ethernet frames (path relative to the profile)",
        )
    })?;
    if stats.frames == 0 {
        return Err(ProfileError::invalid(
            format!("{rpath}.file"),
            format!("{:?} holds no frames", r.file),
            "give a capture with frames",
        ));
    }
    if stats.max_len + 4 > crate::packet::sizes::MAX_FRAME {
        return Err(ProfileError::invalid(
            format!("{rpath}.file"),
            format!(
                "{:?} has a {} B frame, above the {} B gapless sends",
                r.file,
                stats.max_len,
                crate::packet::sizes::MAX_FRAME - 4
            ),
            "drop the jumbo frames from the capture (editcap -s cuts them)",
        ));
    }
    if !fixed_rate && stats.span_ns() == 0 && stats.frames > 1 {
        return Err(ProfileError::invalid(
            &rpath,
            format!(
                "every frame of {:?} has the same timestamp, so its timing gives no rate",
                r.file
            ),
            "give the stream a rate (rate_pps = ...) to replay it at a fixed rate",
        ));
    }
    let loops = match r.loops {
        Some(0) => None,
        Some(n) => Some(n),
        None => Some(1),
    };
    let variant = replay_variant(&stats, seed, path)?;
    let rewrite = crate::packet::rewrite::Rewriter::new(&s.fields, path)?;
    let replay = Replay {
        path: r.file.clone(),
        source,
        stats,
        speed,
        loops,
        fixed_rate,
        rewrite,
        seed: crate::timing::seed::derive_seed(seed, 7, 0),
        sign: r.sign,
    };
    Ok((variant, replay))
}

fn check_keys(s: &crate::spec::StreamSpec, path: &str) -> Result<(), crate::spec::error::ProfileError> {
    use crate::spec::PatternKind;
    let t = &s.timing;
    let other = s.template.is_some() || s.size.is_some() || !s.variants.is_empty();
    if other {
        return Err(crate::spec::error::ProfileError::invalid(
            path,
            "a replayed stream sends the capture's frames, so it has no template, size or variants",
            "remove them ([[stream.field]] ops rewrite the replayed frames)",
        ));
    }
    if t.pattern != PatternKind::Cbr || t.vary.is_some() || t.burst.is_some() {
        return Err(crate::spec::error::ProfileError::invalid(
            format!("{path}.timing"),
            "a replayed stream takes the file's timing, or a fixed rate",
            "remove pattern, vary and burst from its timing",
        ));
    }
    Ok(())
}

/// The variant a replayed stream reports: an unsigned default template, and the capture's
/// range of sizes (with FCS).
fn replay_variant(
    stats: &CaptureStats,
    seed: u64,
    path: &str,
) -> Result<crate::packet::variant::Variant, crate::spec::error::ProfileError> {
    let max = (stats.max_len as usize).max(60);
    let mut template = crate::packet::template::Template::build(
        &crate::spec::TemplateSpec::default(),
        max,
        false,
        Vec::new(),
        seed,
        &format!("{path}.replay"),
    )?;
    template.prepare();
    Ok(crate::packet::variant::Variant {
        name: "replay".into(),
        template,
        ops: Vec::new(),
        sizes: crate::packet::sizes::SizeGen::Range {
            min: stats.min_len + 4,
            max: stats.max_len + 4,
            mean: stats.bytes as f64 / stats.frames as f64 + 4.0,
        },
    })
}
