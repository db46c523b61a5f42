//! What every routing protocol's FRR side shares, sans IO: the allow-list every request
//! string passes before it reaches FRR ([`gate`]), a daemon's vty commands, each built under
//! a name from typed values, and its replies read by that name ([`vty`]), and, in tests, FRR's
//! own dry run of the configurations gapless writes (`dry`).

#[cfg(test)]
pub(crate) mod dry;
pub mod gate;
pub mod vty;
