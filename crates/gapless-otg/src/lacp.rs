//! LACP (IEEE 802.1AX), sans IO, for OTG's `lags[]` (issue 60, in progress): LACPDUs read
//! and written ([`pdu`]) and one member's machines ([`member`]). Nothing here touches a
//! socket; the driver that sends and receives on each member's interface, the LAG's devices
//! and flows, and the OTG model's checks are not built yet.

pub mod member;
pub mod pdu;
