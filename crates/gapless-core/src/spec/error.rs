//! Typed errors of the core.

use thiserror::Error;

/// A profile that cannot run. Names the field path, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The text is not valid TOML, or does not match the profile's schema (unknown key, wrong type).
    #[error("profile {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A value is out of range or inconsistent with another. `path` is the TOML path of the field.
    #[error("{path}: {problem}. Fix: {fix}")]
    Invalid { path: String, problem: String, fix: String },
}

impl ProfileError {
    pub fn invalid(path: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) -> Self {
        ProfileError::Invalid {
            path: path.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}
