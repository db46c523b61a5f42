//! OTG errors as data: the HTTP status, the OTG `kind` and the messages. Each transport turns
//! an [`OtgError`] into its own reply: HTTP and HTTPS send [`OtgError::body`] with
//! [`OtgError::code`] as the status; gRPC maps the code to a status code.

use serde_json::{json, Value};

/// A config that cannot be run: the message names the config path and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl Invalid {
    /// The value of the enum at `at` (one of `allowed`; absent: `default`), or an error with
    /// its path and the values it takes.
    pub fn one_of<'a>(
        v: &'a serde_json::Value,
        at: &str,
        allowed: &[&'a str],
        default: &'a str,
    ) -> Result<&'a str, Invalid> {
        match v {
            serde_json::Value::Null => Ok(default),
            serde_json::Value::String(s) if allowed.contains(&s.as_str()) => Ok(s),
            other => Err(Invalid(format!(
                "{at}: {other} is not one of its values; give {}",
                allowed.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// An OTG error reply: `{code, kind, errors}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtgError {
    /// The HTTP status: 400, 404, 409 or 500.
    pub code: u16,
    /// `validation` or `internal`, as the OTG model names them.
    pub kind: &'static str,
    pub errors: Vec<String>,
}

impl OtgError {
    /// A request that cannot be served as it is (400).
    pub fn invalid(msg: impl Into<String>) -> OtgError {
        OtgError::new(400, "validation", msg.into())
    }

    /// A request that is valid but clashes with what runs (409).
    pub fn conflict(msg: impl Into<String>) -> OtgError {
        OtgError::new(409, "validation", msg.into())
    }

    /// A path outside the OTG subset gapless serves (404).
    pub fn not_found(msg: impl Into<String>) -> OtgError {
        OtgError::new(404, "validation", msg.into())
    }

    /// A fault of gapless's own (500).
    pub fn internal(msg: impl std::fmt::Display) -> OtgError {
        OtgError::new(500, "internal", msg.to_string())
    }

    fn new(code: u16, kind: &'static str, msg: String) -> OtgError {
        OtgError {
            code,
            kind,
            errors: vec![clip(&msg)],
        }
    }

    /// The JSON body of the reply.
    pub fn body(&self) -> Value {
        json!({ "code": self.code, "kind": self.kind, "errors": self.errors })
    }
}

/// The longest word an error quotes whole: a request's value longer than this (a 10,000-byte
/// name) is shown by its start and its length.
const WORD_MAX: usize = 120;

/// `msg` with every word (a run without spaces) longer than [`WORD_MAX`] bytes cut to its
/// first 60 characters and its length.
fn clip(msg: &str) -> String {
    if msg.len() <= WORD_MAX {
        return msg.to_string();
    }
    let words = msg.split(' ').map(|w| match w.len() > WORD_MAX {
        true => format!("{}…({} bytes)", w.chars().take(60).collect::<String>(), w.len()),
        false => w.to_string(),
    });
    words.collect::<Vec<_>>().join(" ")
}

impl From<Invalid> for OtgError {
    fn from(e: Invalid) -> OtgError {
        OtgError::invalid(e.0)
    }
}

#[cfg(test)]
mod clip_tests {
    #[test]
    fn a_long_value_in_an_error_is_shown_by_its_start_and_length() {
        let name = "n".repeat(10_000);
        let e = super::OtgError::invalid(format!("devices[0].name: {name:?} is taken. Fix: rename it"));
        let m = &e.errors[0];
        assert!(
            m.len() < 200 && m.contains("(10002 bytes)") && m.ends_with("Fix: rename it"),
            "got {m}"
        );
        let short = super::OtgError::invalid("flows[0].name: \"f\" is taken");
        assert_eq!(short.errors[0], "flows[0].name: \"f\" is taken");
    }
}
