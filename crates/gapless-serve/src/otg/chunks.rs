//! Work on many devices or routers a few at a time, each on a thread of its own: making a
//! device or starting a daemon is mostly waiting (for `ip`, FRR's dry run, a pid file), so a
//! few overlap well on two cores.

use gapless_otg::OtgError;

/// How many at once.
const AT_ONCE: usize = 8;

/// `f` of every item, [`AT_ONCE`] at a time, in order; the first error, if any (what was
/// made is dropped, which undoes it).
pub fn in_chunks<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, OtgError> + Sync,
) -> Result<Vec<R>, OtgError> {
    let mut out = Vec::with_capacity(items.len());
    for chunk in items.chunks(AT_ONCE) {
        let made: Vec<Result<R, OtgError>> = std::thread::scope(|s| {
            let hs: Vec<_> = chunk.iter().map(|x| s.spawn(|| f(x))).collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(OtgError::internal("a device's or daemon's start panicked")))
                })
                .collect()
        });
        for m in made {
            out.push(m?);
        }
    }
    Ok(out)
}

/// Starts every item with `start`, a few at a time; the first error, if any (items started
/// are stopped by their owner's drop).
pub fn start_all<T: Sync>(items: &[T], start: impl Fn(&T) -> Result<(), OtgError> + Sync) -> Result<(), OtgError> {
    in_chunks(items, start).map(|_| ())
}
