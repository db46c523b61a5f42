//! Keyless lists (a tagged metric's `tags`, a prefix's `as-path`): their entries have no
//! key to put in a path, so no leaf of theirs can be addressed. ygot, which ondatra decodes
//! with, refuses a path through one ("unkeyed list can't be traversed") but takes JSON_IETF
//! at a keyed entry above it and unmarshals the list from that. So such a list travels as
//! one [`Scalar::Json`] leaf at the keyed entry that holds it (`tagged-metric[...]`,
//! valued `{"state": {"tags": [...]}}`).
//!
//! A client that asks below that entry (`.../state/tags`, as ondatra's `TagsAny()` does)
//! gets the part it asked for at its own path ([`parts`]); within the list itself that is
//! one value per entry, all at the list's path.

use serde_json::Value;

use super::path::{Elem, Path};
use super::state::{Leaf, Scalar};

/// What the queries reach inside `leaves`' JSON leaves: each JSON leaf above a query cut to
/// the part below it (once per such query). Every leaf stays as it is beside these, so only
/// the parts are made (a tree of plain leaves costs nothing here).
pub fn parts(queries: &[&Path], leaves: &[Leaf]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for l in leaves {
        let Scalar::Json(v) = &l.value else { continue };
        let depth = l.path.0.len();
        for q in queries
            .iter()
            .filter(|q| q.0.len() > depth && Path(q.0[..depth].to_vec()).covers(&l.path))
        {
            out.extend(narrow(&l.path, v, &q.0[depth..]));
        }
    }
    out
}

/// The part of `v` (at `at`) below the elements `rest`, at `at` + `rest`; none when it has no
/// such part. Past a list, each of its entries gives its part: the value is their array.
fn narrow(at: &Path, v: &Value, rest: &[Elem]) -> Option<Leaf> {
    let mut path = at.clone();
    let mut cur = v.clone();
    let mut many = false;
    for e in rest {
        let pick = |x: &Value| x.get(&e.name).cloned();
        cur = match (&cur, many) {
            (Value::Array(items), true) => Value::Array(items.iter().filter_map(pick).collect()),
            _ => pick(&cur)?,
        };
        many |= cur.is_array();
        path.0.push(Elem::new(&e.name));
    }
    if cur.as_array().is_some_and(Vec::is_empty) {
        return None;
    }
    Some(Leaf {
        path,
        value: Scalar::Json(cur),
    })
}

/// The values of a JSON leaf as PROTO sends them: one per entry of a list cut at its own
/// path, else the one value.
pub fn each(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tagged() -> Leaf {
        Leaf {
            path: Path::parse("flows/flow[name=f]/tagged-metrics/tagged-metric[name-value-pairs=dscp=0x2e&ecn=0x0]")
                .unwrap(),
            value: Scalar::Json(json!({ "state": { "tags": [
                { "tag-name": "dscp", "tag-value": { "value-type": "HEX", "value-as-hex": "0x2e" } },
                { "tag-name": "ecn", "tag-value": { "value-type": "HEX", "value-as-hex": "0x0" } }
            ] } })),
        }
    }

    #[test]
    fn a_query_above_the_entry_gets_it_whole() {
        let q = Path::parse("flows/flow[name=*]").unwrap();
        assert!(q.covers(&tagged().path));
        assert!(
            parts(&[&q], &[tagged()]).is_empty(),
            "nothing to cut: the leaf goes as it is"
        );
    }

    #[test]
    fn a_query_below_the_entry_gets_its_part_at_its_path() {
        let q = Path::parse("flows/flow[name=f]/tagged-metrics/tagged-metric[name-value-pairs=*]/state/tags").unwrap();
        let got = parts(&[&q], &[tagged()]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(q.covers(&got[0].path), "{} under {q}", got[0].path);
        let Scalar::Json(v) = &got[0].value else {
            panic!("{got:?}")
        };
        assert_eq!(each(v).len(), 2, "one value per tag: {v}");
        let names = Path::parse("flows/flow/tagged-metrics/tagged-metric/state/tags/tag-name").unwrap();
        let got = parts(&[&names], &[tagged()]);
        assert_eq!(got[0].value, Scalar::Json(json!(["dscp", "ecn"])));
        let other = Path::parse("flows/flow[name=g]/tagged-metrics/tagged-metric/state/tags").unwrap();
        assert!(
            parts(&[&other], &[tagged()]).is_empty(),
            "another flow's query reaches nothing"
        );
    }
}
