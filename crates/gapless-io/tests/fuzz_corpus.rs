//! Every committed fuzz corpus input (fuzz/corpus/<target>/), replayed on stable Rust through
//! the same body its cargo-fuzz target runs (fuzz/src/bodies.rs). The coverage-guided runs
//! that grow the corpus are bench/fuzz.sh (nightly); this keeps each input found so far a
//! regression test in every `cargo test`. Takes well under a second.
#[allow(dead_code)]
#[path = "../../../fuzz/src/bodies.rs"]
mod bodies;

use std::path::PathBuf;

/// Each input of `target`'s corpus through `body`; the number of inputs. A panic names the file.
fn replay(target: &str, body: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("expected the corpus {}; got {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let run = std::panic::catch_unwind(|| body(&data));
        assert!(run.is_ok(), "the {target} body panicked on {}", f.display());
    }
    files.len()
}

#[test]
fn every_committed_corpus_input_runs_through_its_target_without_a_panic() {
    let n = [
        ("profile", bodies::profile as fn(&[u8])),
        ("capture", bodies::capture),
        ("csv", bodies::csv),
        ("classify", bodies::classify_frame),
    ]
    .map(|(t, body)| (t, replay(t, body)));
    for (t, count) in n {
        assert!(count > 0, "expected inputs in fuzz/corpus/{t}; got none");
    }
}
