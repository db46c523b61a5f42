//! The profile parser and compiler: any text is parsed, and what parses is compiled. Neither
//! may panic; errors are fine.
#![no_main]
use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spec) = ProfileSpec::from_toml(text, "fuzz.toml") {
        let _ = spec.compile(&CompileCtx {
            link_speed_bps: Some(10e9),
            files: &NoFiles,
        });
    }
});
