use std::sync::Arc;

use super::*;
use crate::tx::null::NullTx;

/// A null member that keeps the frames it sent, for the test to read.
struct Kept(NullTx, Arc<std::sync::Mutex<Vec<Vec<u8>>>>);
impl TxBackend for Kept {
    fn name(&self) -> &'static str {
        "kept"
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
        for (i, &l) in lens.iter().enumerate() {
            let f = self.0.buf(i)[..l].to_vec();
            self.1.lock().unwrap().push(f);
        }
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

type Sink = Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

fn lag(n: usize, live: &Arc<LagLive>) -> (LagTx, Vec<Sink>) {
    let sinks: Vec<Sink> = (0..n).map(|_| Sink::default()).collect();
    let members: Vec<Box<dyn TxBackend>> = sinks
        .iter()
        .map(|s| Box::new(Kept(NullTx::new(256, 8), s.clone())) as Box<dyn TxBackend>)
        .collect();
    (LagTx::new(members, live.clone(), 256, 8), sinks)
}

/// A UDP frame from source port `p`, 64 bytes.
fn frame(p: u16) -> Vec<u8> {
    let mut f = vec![
        2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0,
    ];
    f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(p.to_be_bytes());
    f.extend([0x04, 0xd2, 0, 30, 0, 0]);
    f.resize(64, 0xab);
    f
}

/// Sends frames from ports `ports`, 8 a batch, as the loop does.
fn send(tx: &mut LagTx, ports: std::ops::Range<u16>) -> usize {
    let all: Vec<Vec<u8>> = ports.map(frame).collect();
    let mut sent = 0;
    for chunk in all.chunks(8) {
        for (i, f) in chunk.iter().enumerate() {
            tx.buf(i)[..f.len()].copy_from_slice(f);
        }
        let lens: Vec<usize> = chunk.iter().map(|f| f.len()).collect();
        sent += tx.send(&lens, &vec![0; lens.len()]).expect("null members do not fail");
    }
    sent
}

#[test]
fn frames_spread_over_the_distributing_members_whole_and_by_hash() {
    let live = Arc::new(LagLive::all(2));
    let (mut tx, sinks) = lag(2, &live);
    assert_eq!(send(&mut tx, 1000..1400), 400);
    let got: Vec<usize> = sinks.iter().map(|s| s.lock().unwrap().len()).collect();
    assert!(
        got.iter().all(|&n| n >= 150),
        "expected both members to carry at least 150 of 400; got {got:?}"
    );
    assert_eq!(
        (live.sent(0).0 + live.sent(1).0, live.sent(0).1 + live.sent(1).1),
        (400, 400 * 64)
    );
    for (k, s) in sinks.iter().enumerate() {
        for f in s.lock().unwrap().iter() {
            let p = u16::from_be_bytes([f[34], f[35]]);
            assert_eq!(f, &frame(p), "member {k} got a frame other than the one built");
            assert_eq!(spread::hash(f) % 2, k as u32, "the frame's hash picks its member");
        }
    }
}

#[test]
fn a_member_that_stops_distributing_takes_no_more_frames_and_none_drop_them_all() {
    let live = Arc::new(LagLive::all(3));
    let (mut tx, sinks) = lag(3, &live);
    live.set(1, false);
    assert_eq!(send(&mut tx, 0..300), 300);
    assert_eq!(sinks[1].lock().unwrap().len(), 0, "member 1 does not distribute");
    assert!(sinks[0].lock().unwrap().len() > 100 && sinks[2].lock().unwrap().len() > 100);
    for k in 0..3 {
        live.set(k, false);
    }
    assert_eq!(send(&mut tx, 0..16), 0);
    assert_eq!(tx.errors(), 16, "expected the 16 frames no member took as errors");
    assert_eq!(tx.last_error().as_deref(), Some("no member of the LAG is distributing"));
}
