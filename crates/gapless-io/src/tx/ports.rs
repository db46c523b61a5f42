//! Several TX ports under one send loop ([`TxPorts`]): each stream leaves through its own
//! port, and the loop's schedule stays one schedule. Two directions of a trial (A→B and
//! B→A) then take one core, not two: on a 2-core machine the other core is the device's.
//!
//! The loop names the stream of each departure ([`TxBackend::select_stream`]) before it
//! builds the frames, and the frames are built in that port's buffers and sent on its
//! socket. Every port was opened with the same frame size and batch.

use super::TxBackend;
use crate::error::IoError;

/// Ports, and the port of each of the loop's streams.
pub struct TxPorts {
    ports: Vec<Box<dyn TxBackend>>,
    /// How results name each port.
    names: Vec<String>,
    of_stream: Vec<usize>,
    cur: usize,
}

impl TxPorts {
    /// `of_stream[s]` is the index in `ports` of stream `s`'s port; `names` name the ports
    /// in results.
    ///
    /// # Panics
    /// If `ports` is empty or a stream names a port that is not there (a planning bug).
    pub fn new(ports: Vec<Box<dyn TxBackend>>, names: Vec<String>, of_stream: Vec<usize>) -> TxPorts {
        assert!(!ports.is_empty(), "TxPorts needs a port");
        assert!(
            of_stream.iter().all(|&p| p < ports.len()),
            "a stream's port is out of range: {of_stream:?} of {}",
            ports.len()
        );
        TxPorts {
            ports,
            names,
            of_stream,
            cur: 0,
        }
    }

    fn port(&mut self) -> &mut dyn TxBackend {
        &mut *self.ports[self.cur]
    }
}

impl TxBackend for TxPorts {
    fn name(&self) -> &'static str {
        self.ports[0].name()
    }
    fn describe(&self) -> String {
        format!(
            "{} ports on one send loop ({}): {}",
            self.ports.len(),
            self.names.join(", "),
            self.ports[0].describe()
        )
    }
    fn max_batch(&self) -> usize {
        self.ports.iter().map(|p| p.max_batch()).min().unwrap_or(1)
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        self.port().buf(i)
    }
    fn buf_run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        self.port().buf_run(first, n)
    }
    fn send(&mut self, lens: &[usize], at_ns: &[u64]) -> Result<usize, IoError> {
        self.port().send(lens, at_ns)
    }
    fn finish(&mut self) -> Result<(), IoError> {
        super::finish_all(&mut self.ports)
    }
    fn errors(&self) -> u64 {
        self.ports.iter().map(|p| p.errors()).sum()
    }
    fn last_error(&self) -> Option<String> {
        self.ports.iter().find_map(|p| p.last_error())
    }
    fn is_live(&self) -> bool {
        self.ports[0].is_live()
    }
    fn routes_streams(&self) -> bool {
        true
    }
    #[inline]
    fn select_stream(&mut self, stream: usize) {
        self.cur = self.of_stream.get(stream).copied().unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::tx::null::NullTx;

    /// A null port that counts what it sent, where the test can read it.
    struct Counted(NullTx, Arc<AtomicU64>);
    impl TxBackend for Counted {
        fn name(&self) -> &'static str {
            "counted"
        }
        fn describe(&self) -> String {
            String::new()
        }
        fn max_batch(&self) -> usize {
            self.0.max_batch()
        }
        fn buf(&mut self, i: usize) -> &mut [u8] {
            self.0.buf(i)
        }
        fn send(&mut self, lens: &[usize], at: &[u64]) -> Result<usize, IoError> {
            self.1.fetch_add(lens.len() as u64, Ordering::Relaxed);
            self.0.send(lens, at)
        }
        fn finish(&mut self) -> Result<(), IoError> {
            Ok(())
        }
        fn errors(&self) -> u64 {
            0
        }
        fn is_live(&self) -> bool {
            false
        }
    }

    #[test]
    fn each_stream_is_built_and_sent_on_its_port() {
        let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let ports: Vec<Box<dyn TxBackend>> = counts
            .iter()
            .map(|c| Box::new(Counted(NullTx::new(64, 4), c.clone())) as Box<dyn TxBackend>)
            .collect();
        let mut m = TxPorts::new(ports, vec!["a".into(), "b".into()], vec![0, 1, 1]);
        for (stream, n) in [(0, 1), (1, 2), (2, 3), (0, 1)] {
            m.select_stream(stream);
            let lens = vec![60; n];
            assert_eq!(m.send(&lens, &vec![0; n]).unwrap(), n);
        }
        let got: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(got, vec![2, 5], "frames per port: expected [2, 5], got {got:?}");
        assert!(m.routes_streams());
        assert_eq!(m.max_batch(), 4);
    }
}
