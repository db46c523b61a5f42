//! The OTG YANG models' state trees as one table (`schema.tsv`, made by
//! `scripts/otg_yang_table.py` with pyang from open-traffic-generator/models-yang at the
//! commit its first line names): every container, list (with its keys), leaf and leaf-list,
//! each leaf with its YANG type, the built-in it resolves to, and an enumeration's values.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::path::Path;

/// The table, as committed.
const TABLE: &str = include_str!("schema.tsv");

/// One schema node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: Kind,
    /// The names from the root: `["flows", "flow", "state", "counters", "in-pkts"]`.
    pub names: Vec<String>,
    /// A leaf's type as the module names it (`counter64`, `ieeefloat32`, `string`).
    pub ty: String,
    /// The built-in it resolves to (`uint64`, `binary`, `decimal64`, `enumeration`).
    pub base: String,
    /// A list's keys (empty: a keyless list).
    pub keys: Vec<String>,
    /// An enumeration's values, as the YANG spells them.
    pub enums: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Container,
    List,
    Leaf,
    LeafList,
}

/// Every node, by its names joined with `/`.
pub struct Schema {
    nodes: HashMap<String, Node>,
    /// The children's names of each node (the root is "").
    children: HashMap<String, Vec<String>>,
    /// The models-yang commit the table was made from.
    pub commit: String,
}

static SCHEMA: LazyLock<Schema> = LazyLock::new(|| Schema::parse(TABLE));

impl Schema {
    /// The committed table.
    pub fn get() -> &'static Schema {
        &SCHEMA
    }

    fn parse(text: &str) -> Schema {
        let mut s = Schema {
            nodes: HashMap::new(),
            children: HashMap::new(),
            commit: String::new(),
        };
        for line in text.lines() {
            if let Some(c) = line.strip_prefix("# open-traffic-generator/models-yang ") {
                s.commit = c.split(':').next().unwrap_or_default().into();
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let [kind, path, ty, base, extra] = f[..] else { continue };
            let kind = match kind {
                "container" => Kind::Container,
                "list" => Kind::List,
                "leaf" => Kind::Leaf,
                _ => Kind::LeafList,
            };
            let names: Vec<String> = path.trim_start_matches('/').split('/').map(String::from).collect();
            let words = |sep: char| extra.split(sep).filter(|w| !w.is_empty()).map(String::from).collect();
            let (keys, enums) = if kind == Kind::List {
                (words(' '), Vec::new())
            } else {
                (Vec::new(), words(','))
            };
            let key = names.join("/");
            let parent = names[..names.len() - 1].join("/");
            s.children
                .entry(parent)
                .or_default()
                .push(names[names.len() - 1].clone());
            s.nodes.insert(
                key,
                Node {
                    kind,
                    names,
                    ty: ty.into(),
                    base: base.into(),
                    keys,
                    enums,
                },
            );
        }
        s
    }

    /// The node at `names` (no keys).
    pub fn node(&self, names: &[&str]) -> Option<&Node> {
        self.nodes.get(&names.join("/"))
    }

    /// Every node at or below `names`.
    pub fn below<'a>(&'a self, names: &'a [String]) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.values().filter(move |n| n.names.starts_with(names))
    }

    /// Whether `p` is a path of the schema: each element a child of the one before, keys
    /// only on a list entry and only its own. The error names the first element that is not,
    /// and what is there.
    pub fn check(&self, p: &Path) -> Result<(), String> {
        let mut at: Vec<&str> = Vec::new();
        for e in &p.0 {
            let here = at.join("/");
            at.push(&e.name);
            let Some(n) = self.node(&at) else {
                let mut there = self.children.get(&here).cloned().unwrap_or_default();
                there.sort();
                return Err(format!(
                    "{p}: the OTG models have no {:?} at /{here} (there: {})",
                    e.name,
                    there.join(", ")
                ));
            };
            if let Some(k) = e.keys.keys().find(|k| !n.keys.contains(k)) {
                return Err(format!(
                    "{p}: {} has no key {k:?} (its keys: {})",
                    e.name,
                    if n.keys.is_empty() {
                        "none".into()
                    } else {
                        n.keys.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_the_trees_clients_read_with_their_types() {
        let s = Schema::get();
        assert_eq!(s.commit.len(), 40, "expected the pinned commit; got {:?}", s.commit);
        let n = s
            .node(&["flows", "flow", "state", "counters", "in-pkts"])
            .expect("in-pkts");
        assert_eq!(
            (n.kind, n.ty.as_str(), n.base.as_str()),
            (Kind::Leaf, "counter64", "uint64")
        );
        assert_eq!(s.node(&["flows", "flow"]).unwrap().keys, ["name"]);
        let link = s.node(&["ports", "port", "state", "link"]).unwrap();
        assert_eq!(link.enums, ["UP", "DOWN"]);
        let state = s.node(&["bgp-peers", "bgp-peer", "state", "session-state"]).unwrap();
        assert!(state.enums.contains(&"ESTABLISHED".to_string()), "{state:?}");
        let nb = s
            .node(&["interfaces", "interface", "ipv4-neighbors", "ipv4-neighbor"])
            .unwrap();
        assert_eq!(nb.keys, ["ipv4-address"]);
    }

    #[test]
    fn a_path_outside_the_schema_is_named_with_what_is_there() {
        let s = Schema::get();
        for ok in [
            "flows/flow[name=*]/state",
            "flows",
            "ports/port[name=p1]/state/counters/in-frames",
        ] {
            assert_eq!(s.check(&Path::parse(ok).unwrap()), Ok(()), "{ok}");
        }
        let e = s.check(&Path::parse("flows/flow[name=f]/stats").unwrap()).unwrap_err();
        assert!(
            e.contains("no \"stats\" at /flows/flow (there: name, state, tagged-metrics)"),
            "{e}"
        );
        let e = s.check(&Path::parse("flows/flow[id=f]").unwrap()).unwrap_err();
        assert!(e.contains("flow has no key \"id\" (its keys: name)"), "{e}");
    }
}
