//! The JSON encodings of gNMI (JSON and JSON_IETF, RFC 7951), sans IO: a leaf's value, and
//! the tree below a path as one value, with list entries as arrays of objects that hold
//! their keys. PROTO, the encoding ondatra uses, needs none of this: one scalar per leaf.
//!
//! RFC 7951 writes 64-bit integers and decimal64 as strings and binary (an `ieeefloat32`)
//! as base64; plain JSON writes numbers as numbers and a float as a number. At the root, a
//! top-level node's name is qualified by its module (`open-traffic-generator-flow:flows`).

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Map, Value};

use super::path::{Elem, Path};
use super::schema::Schema;
use super::state::{Leaf, Scalar};

/// The OTG models the trees come from, with their revisions at the pinned commit: their
/// top-level node and module.
pub const MODULES: [(&str, &str, &str); 10] = [
    ("flows", "open-traffic-generator-flow", "2022-01-21"),
    ("ports", "open-traffic-generator-port", "2022-01-21"),
    ("interfaces", "open-traffic-generator-discovery", "2022-01-21"),
    ("bgp-peers", "open-traffic-generator-bgp", "2022-01-21"),
    ("isis-routers", "open-traffic-generator-isis", "2022-01-21"),
    ("ospfv2-routers", "open-traffic-generator-ospfv2", "2022-01-21"),
    ("ospfv3-routers", "open-traffic-generator-ospfv3", "2022-01-21"),
    ("lldps", "open-traffic-generator-lldp", "2022-08-09"),
    ("lags", "open-traffic-generator-lag", "2022-06-08"),
    ("lacp", "open-traffic-generator-lacp", "2022-06-08"),
];

/// Which JSON: RFC 7951's (`ietf`) or plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Json {
    pub ietf: bool,
}

impl Json {
    /// A leaf's value at `path` (its YANG type read from the schema).
    pub fn scalar(&self, path: &Path, v: &Scalar) -> Value {
        match v {
            Scalar::Uint(n) => {
                let names: Vec<&str> = path.0.iter().map(|e| e.name.as_str()).collect();
                let wide = Schema::get().node(&names).is_none_or(|n| n.base == "uint64");
                if self.ietf && wide {
                    Value::String(n.to_string())
                } else {
                    Value::from(*n)
                }
            }
            Scalar::Float32(x) if self.ietf => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(x.to_be_bytes()))
            }
            Scalar::Float32(x) => Value::from(*x as f64),
            Scalar::Double(x) if self.ietf => Value::String(x.to_string()),
            Scalar::Double(x) => Value::from(*x),
            Scalar::Str(s) => Value::String(s.clone()),
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Json(v) => v.clone(),
            Scalar::Strs(v) => Value::from(v.clone()),
        }
    }

    /// The values at `query`: one per entry its wildcards match, each at that entry's
    /// concrete path, holding every leaf below it (a leaf's own value when the path is one).
    pub fn values(&self, query: &Path, leaves: &[Leaf]) -> Vec<(Path, Value)> {
        let depth = query.0.len();
        let mut at: BTreeMap<Path, Vec<&Leaf>> = BTreeMap::new();
        for l in leaves.iter().filter(|l| query.covers(&l.path)) {
            at.entry(Path(l.path.0[..depth].to_vec())).or_default().push(l);
        }
        at.into_iter()
            .map(|(anchor, mine)| {
                let mut v = match mine[..] {
                    [l] if l.path.0.len() == depth => self.scalar(&l.path, &l.value),
                    _ => self.tree(depth, &mine),
                };
                // A list entry's value holds its keys, as RFC 7951 writes every entry.
                if let (Some(e), Value::Object(o)) = (anchor.0.last(), &mut v) {
                    for (k, key) in &e.keys {
                        o.entry(k.clone()).or_insert_with(|| Value::String(key.clone()));
                    }
                }
                (anchor, v)
            })
            .collect()
    }

    /// The object of the leaves below depth `depth` of their paths.
    fn tree(&self, depth: usize, leaves: &[&Leaf]) -> Value {
        let mut root = Map::new();
        for l in leaves {
            let mut obj = &mut root;
            let rest = &l.path.0[depth..];
            for (i, e) in rest.iter().enumerate() {
                let name = self.name(depth + i, e);
                if let (true, Scalar::Json(Value::Object(sub))) = (i + 1 == rest.len(), &l.value) {
                    // A keyless list's subtree, at its entry or container: merged into it.
                    let at = if e.keys.is_empty() {
                        obj.entry(name)
                            .or_insert_with(|| Value::Object(Map::new()))
                            .as_object_mut()
                    } else {
                        Some(entry(obj.entry(name).or_insert_with(|| Value::Array(vec![])), e))
                    };
                    merge(at.expect("a container is an object"), sub);
                    break;
                }
                if i + 1 == rest.len() {
                    obj.insert(name, self.scalar(&l.path, &l.value));
                    break;
                }
                obj = if e.keys.is_empty() {
                    obj.entry(name)
                        .or_insert_with(|| Value::Object(Map::new()))
                        .as_object_mut()
                        .expect("a container is an object")
                } else {
                    entry(obj.entry(name).or_insert_with(|| Value::Array(vec![])), e)
                };
            }
        }
        Value::Object(root)
    }

    /// A member's name: at the root, with its module in RFC 7951.
    fn name(&self, depth: usize, e: &Elem) -> String {
        match MODULES.iter().find(|m| m.0 == e.name) {
            Some((_, module, _)) if depth == 0 && self.ietf => format!("{module}:{}", e.name),
            _ => e.name.clone(),
        }
    }
}

/// `src`'s members into `dst`, objects member by member.
fn merge(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            (Some(Value::Object(d)), Value::Object(s)) => merge(d, s),
            _ => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The object of the list entry `e` in `list`, made (with its keys) when it is not there.
fn entry<'a>(list: &'a mut Value, e: &Elem) -> &'a mut Map<String, Value> {
    let items = list.as_array_mut().expect("a list is an array");
    let same = |o: &Value| e.keys.iter().all(|(k, v)| o.get(k).and_then(Value::as_str) == Some(v));
    let i = match items.iter().position(same) {
        Some(i) => i,
        None => {
            let keys = e.keys.iter().map(|(k, v)| (k.clone(), Value::String(v.clone())));
            items.push(Value::Object(keys.collect()));
            items.len() - 1
        }
    };
    items[i].as_object_mut().expect("a list entry is an object")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    use crate::testing::leaf;

    fn leaves() -> Vec<Leaf> {
        vec![
            leaf("flows/flow[name=f1]/state/counters/in-pkts", Scalar::Uint(7)),
            leaf("flows/flow[name=f1]/state/in-frame-rate", Scalar::Float32(1.5)),
            leaf("flows/flow[name=f2]/state/counters/in-pkts", Scalar::Uint(9)),
            leaf("flows/flow[name=f2]/state/transmit", Scalar::Bool(true)),
        ]
    }

    #[test]
    fn rfc7951_writes_uint64_as_a_string_and_a_float32_as_base64() {
        let j = Json { ietf: true };
        let p = Path::parse("flows/flow[name=f1]/state/counters/in-pkts").unwrap();
        assert_eq!(j.scalar(&p, &Scalar::Uint(7)), json!("7"));
        assert_eq!(Json { ietf: false }.scalar(&p, &Scalar::Uint(7)), json!(7));
        let f = Path::parse("flows/flow[name=f1]/state/in-frame-rate").unwrap();
        assert_eq!(
            j.scalar(&f, &Scalar::Float32(1.5)),
            json!("P8AAAA=="),
            "1.5 is 3f c0 00 00"
        );
    }

    #[test]
    fn a_wildcard_gives_a_value_per_entry_and_the_root_a_tree_with_modules() {
        let j = Json { ietf: true };
        let per = j.values(&Path::parse("flows/flow[name=*]/state/counters").unwrap(), &leaves());
        assert_eq!(per.len(), 2);
        assert_eq!(per[0].0.to_string(), "/flows/flow[name=f1]/state/counters");
        assert_eq!(per[0].1, json!({"in-pkts": "7"}));
        let entry = j.values(&Path::parse("flows/flow").unwrap(), &leaves());
        assert_eq!(
            entry[1].1,
            json!({"name": "f2", "state": {"counters": {"in-pkts": "9"}, "transmit": true}})
        );
        let one = j.values(&Path::parse("flows/flow[name=f2]/state/transmit").unwrap(), &leaves());
        assert_eq!(
            one,
            [(Path::parse("flows/flow[name=f2]/state/transmit").unwrap(), json!(true))]
        );
        let root = j.values(&Path::default(), &leaves());
        assert_eq!(root.len(), 1);
        let flows = &root[0].1["open-traffic-generator-flow:flows"]["flow"];
        assert_eq!(
            flows[1],
            json!({"name": "f2", "state": {"counters": {"in-pkts": "9"}, "transmit": true}})
        );
        assert_eq!(flows[0]["state"]["in-frame-rate"], json!("P8AAAA=="));
    }
}
