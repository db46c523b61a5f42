//! pcap replay: a stream whose frames and departure times come from a capture. The core
//! reads nothing itself: the front end's [`crate::dist::FileLoader`] opens the capture as a
//! [`CaptureSource`], which hands out streaming readers, so a file of any length replays in
//! constant memory.
//!
//! Timing: the file's own (each frame at its timestamp relative to the first, divided by
//! `speed`), or a fixed rate when the stream's timing gives one. Loops are continuous: loop
//! k+1 starts one mean gap after loop k's last frame.

use std::fmt;
use std::sync::Arc;

/// A capture that can be read from its start, as often as needed.
pub trait CaptureSource: Send + Sync {
    /// A new reader at the first frame.
    fn open(&self) -> Result<Box<dyn CaptureFrames>, String>;
}

/// A streaming reader of a capture.
pub trait CaptureFrames: Send {
    /// Reads the next frame into `buf` (replacing its contents) and returns its timestamp
    /// (ns), or `None` at the end of the file.
    fn next_frame(&mut self, buf: &mut Vec<u8>) -> Option<u64>;
}

/// What a scan of the whole capture found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaptureStats {
    pub frames: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Frame lengths as captured (no FCS).
    pub min_len: u32,
    pub max_len: u32,
    pub bytes: u64,
    /// The file's timestamp resolution, e.g. "ns" or "µs".
    pub resolution: String,
    /// Frames whose timestamp is before the frame before them (sent at once, in file order).
    pub backwards: u64,
    /// Frames cut short by the capture's snap length (sent as captured).
    pub cut: u64,
}

impl CaptureStats {
    /// The time from the first frame to the last, ns.
    pub fn span_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.first_ns)
    }

    /// The file's mean rate (frames/s), if it spans any time.
    pub fn mean_pps(&self) -> Option<f64> {
        (self.frames > 1 && self.span_ns() > 0).then(|| (self.frames - 1) as f64 * 1e9 / self.span_ns() as f64)
    }
}

/// A compiled replay.
#[derive(Clone)]
pub struct Replay {
    pub path: String,
    pub source: Arc<dyn CaptureSource>,
    pub stats: CaptureStats,
    /// File timing divided by this (2 = twice as fast). 1 with a fixed rate.
    pub speed: f64,
    /// Times through the file; `None` = until stopped.
    pub loops: Option<u64>,
    /// The stream's rate key replaces the file's timing.
    pub fixed_rate: bool,
    /// The stream's `[[stream.field]]` ops, applied to each replayed frame.
    pub rewrite: crate::rewrite::Rewriter,
    pub seed: u64,
    /// Sign the frames that can carry the signature (UDP/TCP with 16 B of payload).
    pub sign: bool,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("path", &self.path)
            .field("stats", &self.stats)
            .field("speed", &self.speed)
            .field("loops", &self.loops)
            .field("fixed_rate", &self.fixed_rate)
            .finish()
    }
}

impl Replay {
    /// The time from one loop's first frame to the next loop's first frame, ns (file time,
    /// before `speed`): the file's span plus one mean gap.
    pub fn loop_period_ns(&self) -> f64 {
        let s = &self.stats;
        let span = s.span_ns() as f64;
        if s.frames > 1 {
            span + span / (s.frames - 1) as f64
        } else {
            0.0
        }
    }

    /// Frames the whole replay sends (`None`: until stopped).
    pub fn total_frames(&self) -> Option<u64> {
        self.loops.map(|l| l * self.stats.frames)
    }
}

/// A replay being read: the next frame is held ahead, so its time is known before it is
/// built.
pub struct ReplayState {
    replay: Replay,
    reader: Box<dyn CaptureFrames>,
    next: Vec<u8>,
    next_ts: Option<u64>,
    /// Loops finished so far.
    loop_idx: u64,
    /// Departure time of the last frame, relative to the stream's start (file timing kept
    /// monotonic).
    last_rel: u64,
    rewrite: crate::rewrite::Rewriter,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl fmt::Debug for ReplayState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayState")
            .field("replay", &self.replay)
            .field("loop_idx", &self.loop_idx)
            .finish()
    }
}

impl ReplayState {
    /// Opens the capture at its first frame. A capture that cannot be opened again (it was
    /// read at compile time) replays nothing.
    pub fn new(replay: Replay) -> ReplayState {
        let reader = replay
            .source
            .open()
            .unwrap_or_else(|_| Box::new(Empty) as Box<dyn CaptureFrames>);
        let rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(replay.seed);
        let mut s = ReplayState {
            rewrite: replay.rewrite.clone(),
            rng,
            replay,
            reader,
            next: Vec::with_capacity(2048),
            next_ts: None,
            loop_idx: 0,
            last_rel: 0,
        };
        s.read_ahead();
        s
    }

    fn read_ahead(&mut self) {
        self.next_ts = self.reader.next_frame(&mut self.next);
        if self.next_ts.is_none() {
            self.loop_idx += 1;
            if self.replay.loops.is_none_or(|l| self.loop_idx < l) && self.replay.stats.frames > 0 {
                if let Ok(r) = self.replay.source.open() {
                    self.reader = r;
                    self.next_ts = self.reader.next_frame(&mut self.next);
                }
            }
        }
    }

    /// Whether a frame is left.
    #[inline]
    pub fn has_next(&self) -> bool {
        self.next_ts.is_some()
    }

    /// The next frame's departure time relative to the stream's start, by the file's timing
    /// (never before the frame before it).
    #[inline]
    pub fn next_rel_ns(&self) -> Option<u64> {
        let ts = self.next_ts?;
        let r = &self.replay;
        let in_file = ts.saturating_sub(r.stats.first_ns) as f64 + self.loop_idx as f64 * r.loop_period_ns();
        Some(((in_file / r.speed) as u64).max(self.last_rel))
    }

    /// Copies the next frame into `buf`, reads ahead, and returns its length.
    #[inline]
    pub fn take(&mut self, buf: &mut [u8]) -> usize {
        if let Some(t) = self.next_rel_ns() {
            self.last_rel = t;
        }
        let len = self.next.len().min(buf.len());
        buf[..len].copy_from_slice(&self.next[..len]);
        if !self.rewrite.is_empty() && len > 0 {
            self.rewrite.apply(&mut buf[..len], &mut self.rng);
        }
        self.read_ahead();
        len
    }

    /// The length of the next frame (0 at the end).
    pub fn next_len(&self) -> usize {
        if self.has_next() {
            self.next.len()
        } else {
            0
        }
    }
}

struct Empty;
impl CaptureFrames for Empty {
    fn next_frame(&mut self, _: &mut Vec<u8>) -> Option<u64> {
        None
    }
}

/// Compiles a `[stream.replay]`: scans the capture (through `files`) and makes the stream's
/// one variant, whose sizes are the capture's range. Returns the variant and the replay;
/// `fixed_rate` is whether the stream's timing gives a rate.
pub fn compile(
    s: &crate::spec::StreamSpec,
    r: &crate::spec::ReplaySpec,
    path: &str,
    seed: u64,
    files: &dyn crate::dist::FileLoader,
) -> Result<(crate::variant::Variant, Replay), crate::error::ProfileError> {
    use crate::error::ProfileError;
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
    if stats.max_len + 4 > crate::config::MAX_FRAME {
        return Err(ProfileError::invalid(
            format!("{rpath}.file"),
            format!(
                "{:?} has a {} B frame, above the {} B gapless sends",
                r.file,
                stats.max_len,
                crate::config::MAX_FRAME - 4
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
    let rewrite = crate::rewrite::Rewriter::new(&s.fields, path)?;
    let replay = Replay {
        path: r.file.clone(),
        source,
        stats,
        speed,
        loops,
        fixed_rate,
        rewrite,
        seed: crate::config::derive_seed(seed, 7, 0),
        sign: r.sign,
    };
    Ok((variant, replay))
}

fn check_keys(s: &crate::spec::StreamSpec, path: &str) -> Result<(), crate::error::ProfileError> {
    use crate::spec::PatternKind;
    let t = &s.timing;
    let other = s.template.is_some() || s.size.is_some() || !s.variants.is_empty();
    if other {
        return Err(crate::error::ProfileError::invalid(
            path,
            "a replayed stream sends the capture's frames, so it has no template, size or variants",
            "remove them ([[stream.field]] ops rewrite the replayed frames)",
        ));
    }
    if t.pattern != PatternKind::Cbr || t.vary.is_some() || t.burst.is_some() {
        return Err(crate::error::ProfileError::invalid(
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
) -> Result<crate::variant::Variant, crate::error::ProfileError> {
    let max = (stats.max_len as usize).max(60);
    let mut template = crate::template::Template::build(
        &crate::spec::TemplateSpec::default(),
        max,
        false,
        Vec::new(),
        seed,
        &format!("{path}.replay"),
    )?;
    template.prepare();
    Ok(crate::variant::Variant {
        name: "replay".into(),
        template,
        ops: Vec::new(),
        sizes: crate::config::SizeGen::Range {
            min: stats.min_len + 4,
            max: stats.max_len + 4,
            mean: stats.bytes as f64 / stats.frames as f64 + 4.0,
        },
    })
}
