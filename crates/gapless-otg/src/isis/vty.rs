//! isisd's vty: every command a server sends it, and its replies read by name.

use serde_json::Value;

use crate::frr::vty::{Ask, Replies};
use crate::isis::{frr_text, Router};

/// The daemon these commands are for.
pub const DAEMON: &str = "isisd";

/// The router's summary (JSON), its adjacencies and its database (text: FRR 8.4 has no JSON
/// for them).
pub fn metric() -> Ask {
    Ask::new(DAEMON)
        .with("summary", "show isis summary json")
        .with("neighbors", "show isis neighbor detail")
        .with("database", "show isis database detail")
}

/// The router's `isis_metrics` entry from the replies to [`metric`] (none: its sessions
/// down) and the adjacency downs per level its log shows.
pub fn metric_of(r: &Router, replies: &Replies, downs: [u64; 2]) -> Value {
    let adj = frr_text::adjacencies(replies.text("neighbors"));
    let db = frr_text::database(replies.text("database"));
    frr_text::metric(&r.name, r.levels(), &replies.json("summary"), &adj, downs, &db)
}

/// The hostnames isisd knows (to name LSPs by system id) and its database.
pub fn lsps() -> Ask {
    Ask::new(DAEMON)
        .with("hostnames", "show isis hostname")
        .with("database", "show isis database detail")
}

/// The router's `isis_lsps` state from the replies to [`lsps`] (none: no LSP).
pub fn lsps_of(r: &Router, replies: &Replies) -> Value {
    let db = frr_text::database(replies.text("database"));
    frr_text::lsps_state(&r.name, &db, &frr_text::hostnames(replies.text("hostnames")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_replies_a_router_has_no_lsp_and_no_adjacency() {
        let r = crate::isis::tests::a_router();
        assert_eq!(
            lsps_of(&r, &Replies::none()),
            serde_json::json!({ "isis_router_name": r.name, "lsps": [] })
        );
        let m = metric_of(&r, &Replies::none(), [0, 0]);
        assert_eq!(m["name"], r.name.as_str(), "{m}");
        assert_eq!(lsps().commands(), ["show isis hostname", "show isis database detail"]);
    }
}
