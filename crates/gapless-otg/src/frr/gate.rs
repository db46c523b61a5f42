//! The gate every request string passes before it reaches FRR, in a configuration file or a
//! vty command: [`word`]. Numbers and addresses are written from their parsed types, and a
//! closed set of values (a BGP range's origin) from an enum; any other string a writer
//! interpolates (a name, an MD5 key, a hostname) passes [`word`], or the request is refused
//! with its path before anything acts. `gapless_io::devices::frr::check_config` is the last gate, on
//! the whole text a daemon is given.

/// A word FRR's configuration takes whole: 1 to 80 bytes of printable ASCII, no space. A
/// string with a space could add an argument to its line, and one with a line break a line
/// of its own (e.g. `log file PATH`).
pub fn word(s: &str) -> bool {
    (1..=80).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_printable_ascii_without_space_or_line_break() {
        for ok in ["igp", "r1", "GL-RR-0-1", "k3y!#x", "a.b:c/d_e-f"] {
            assert!(word(ok), "expected {ok:?} allowed");
        }
        let long = "x".repeat(81);
        for bad in ["", "igp\nexit", "a b", "a\tb", "a\rb", "é", "a\0b", long.as_str()] {
            assert!(!word(bad), "expected {bad:?} refused");
        }
    }
}
