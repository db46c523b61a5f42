//! gNMI paths as the OTG trees use them: elements with list keys, `*` as a wildcard (a key
//! of `*`, or a key left out), written and read as `flows/flow[name=f1]/state`.

use std::collections::BTreeMap;
use std::fmt;

/// One element: a node's name and, for a list entry, its keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Elem {
    pub name: String,
    pub keys: BTreeMap<String, String>,
}

impl Elem {
    pub fn new(name: &str) -> Elem {
        Elem {
            name: name.into(),
            keys: BTreeMap::new(),
        }
    }

    /// With the key `k` = `v`.
    pub fn key(mut self, k: &str, v: &str) -> Elem {
        self.keys.insert(k.into(), v.into());
        self
    }
}

/// A path: its elements from the root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Path(pub Vec<Elem>);

impl Path {
    /// Reads `a/b[k=v][k2=v2]/c` (a leading `/` is allowed; a value may hold `/`, not `]`).
    pub fn parse(s: &str) -> Result<Path, String> {
        let mut out = Vec::new();
        let mut rest = s.trim_start_matches('/');
        while !rest.is_empty() {
            let end = elem_end(rest);
            out.push(elem(&rest[..end]).map_err(|e| format!("path {s:?}: {e}"))?);
            rest = rest[end..].trim_start_matches('/');
        }
        Ok(Path(out))
    }

    /// Whether `leaf` (a concrete path) is this path or below it, with this path's wildcards
    /// (`*`, or a key not given) taking any value.
    pub fn covers(&self, leaf: &Path) -> bool {
        self.0.len() <= leaf.0.len()
            && self
                .0
                .iter()
                .zip(&leaf.0)
                .all(|(q, l)| q.name == l.name && q.keys.iter().all(|(k, v)| v == "*" || l.keys.get(k) == Some(v)))
    }
}

/// Where the element that starts `s` ends: at the first `/` outside brackets.
fn elem_end(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '/' if depth == 0 => return i,
            _ => {}
        }
    }
    s.len()
}

fn elem(s: &str) -> Result<Elem, String> {
    let (name, mut keys) = s.split_once('[').map_or((s, ""), |(n, k)| (n, k));
    if name.is_empty() {
        return Err("an element has no name".into());
    }
    let mut e = Elem::new(name);
    while !keys.is_empty() {
        let (kv, rest) = keys
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: a key is not closed with ]"))?;
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: a key is not name=value"))?;
        e.keys.insert(k.into(), v.into());
        keys = rest.strip_prefix('[').unwrap_or(rest);
        if !rest.is_empty() && !rest.starts_with('[') {
            return Err(format!("{s:?}: text after a key"));
        }
    }
    Ok(e)
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            write!(f, "/{}", e.name)?;
            for (k, v) in &e.keys {
                write!(f, "[{k}={v}]")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_read_with_its_keys_and_written_back() {
        let p = Path::parse("/flows/flow[name=f/1]/state/counters").unwrap();
        assert_eq!(p.0[1], Elem::new("flow").key("name", "f/1"));
        assert_eq!(p.to_string(), "/flows/flow[name=f/1]/state/counters");
        let k = Path::parse("a/p[address=10.0.0.0][prefix-length=24]/state").unwrap();
        assert_eq!(k.0[1].keys.len(), 2);
        for bad in ["a//[k=v]", "a/b[k=v", "a/b[kv]", "a/b[k=v]x"] {
            assert!(Path::parse(bad).is_err(), "expected {bad:?} refused");
        }
    }

    #[test]
    fn a_wildcard_or_a_missing_key_covers_every_entry_at_any_depth() {
        let leaf = Path::parse("flows/flow[name=f1]/state/counters/in-pkts").unwrap();
        for q in [
            "flows",
            "flows/flow[name=*]",
            "flows/flow",
            "flows/flow[name=f1]/state",
            "/flows/flow[name=f1]/state/counters/in-pkts",
        ] {
            assert!(Path::parse(q).unwrap().covers(&leaf), "expected {q} to cover the leaf");
        }
        for q in [
            "flows/flow[name=f2]",
            "ports",
            "flows/flow[name=f1]/state/counters/in-pkts/x",
        ] {
            assert!(
                !Path::parse(q).unwrap().covers(&leaf),
                "expected {q} not to cover the leaf"
            );
        }
    }
}
