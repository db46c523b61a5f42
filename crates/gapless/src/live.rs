//! The live status line of a running command: once a second on stderr, rewritten in place
//! on a terminal.

use std::io::IsTerminal;
use std::time::Duration;

/// Prints a line every second until `wait` (which blocks up to the time it is given) says
/// the run ended.
pub fn live_lines(quiet: bool, wait: impl Fn(Duration) -> bool, line: impl Fn() -> String) {
    let tty = std::io::stderr().is_terminal();
    while !wait(Duration::from_secs(1)) {
        if quiet {
            continue;
        }
        if tty {
            eprint!("\r\x1b[2K{}", line());
        } else {
            eprintln!("{}", line());
        }
    }
    if !quiet && tty {
        eprintln!();
    }
}
