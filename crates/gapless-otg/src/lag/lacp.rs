//! LACP (IEEE 802.1AX), sans IO, for OTG's `lags[]`: LACPDUs read and written ([`pdu`]) and
//! one member's machines on a clock given as an argument ([`member`]). Nothing here touches a
//! socket: the server's LAG driver (gapless-serve `otg::lag`) runs the machines on each
//! member's interface, and [`crate::lag`] reads and checks the model's `lags[]`.

pub mod member;
pub mod pdu;
