//! The files a profile names: the loader a front end supplies (the core does no IO), and
//! the capture readers a replay streams its frames from.

/// Reads the files a profile names (empirical tables). The core does no IO itself.
pub trait FileLoader {
    fn load(&self, path: &str) -> Result<String, String>;
    /// Opens a capture to replay, after a scan of it.
    fn capture(
        &self,
        path: &str,
    ) -> Result<
        (
            std::sync::Arc<dyn crate::spec::files::CaptureSource>,
            crate::spec::files::CaptureStats,
        ),
        String,
    > {
        Err(format!("no capture access here (asked for {path})"))
    }
}

/// A loader that refuses every file, for profiles that must not read any.
pub struct NoFiles;
impl FileLoader for NoFiles {
    fn load(&self, path: &str) -> Result<String, String> {
        Err(format!("no file access here (asked for {path})"))
    }
}

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
