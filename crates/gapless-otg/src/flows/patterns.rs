//! OTG header-field patterns (`value`, `values`, `increment`, `decrement`, `random`, `auto`) as the
//! template's value plus a `[[stream.field]]` op. Increment `{start, step, count}` walks
//! `start, start+step, ..., start+(count-1)*step` and wraps: the field engine's `inc` over
//! `[start, start+step*count-1]` with that step gives exactly this sequence (and `dec` over
//! `[start-step*count+1, start]` the decrement).

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::{json, Map, Value};

use crate::error::Invalid;

/// A number, or a 64-bit number sent as a string.
pub fn num(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A float, or one sent as a string.
pub fn float(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// What a field holds, for parsing and printing its values.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Mac,
    Ipv4,
    Ipv6,
    /// An integer of this many bits.
    Int(u32),
}

/// A field's pattern read: the template's value and, when it varies, the field op.
pub struct Pattern {
    pub first: Option<Value>,
    pub op: Option<Map<String, Value>>,
}

impl Kind {
    pub(crate) fn parse(self, v: &Value, path: &str) -> Result<u128, Invalid> {
        let bad = || Invalid(format!("{path}: {v} is not {}", self.what()));
        match self {
            Kind::Int(bits) => {
                let n = num(v).ok_or_else(bad)? as u128;
                if bits < 64 && n >= 1u128 << bits {
                    return Err(Invalid(format!("{path}: {n} does not fit in {bits} bits")));
                }
                Ok(n)
            }
            Kind::Ipv4 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
                .map(|a| u32::from(a) as u128)
                .ok_or_else(bad),
            Kind::Ipv6 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv6Addr>().ok())
                .map(u128::from)
                .ok_or_else(bad),
            Kind::Mac => {
                let s = v.as_str().ok_or_else(bad)?;
                let parts: Vec<_> = s.split(':').collect();
                if parts.len() != 6 {
                    return Err(bad());
                }
                parts.iter().try_fold(0u128, |acc, p| {
                    u8::from_str_radix(p, 16)
                        .map(|b| acc << 8 | u128::from(b))
                        .map_err(|_| bad())
                })
            }
        }
    }

    fn show(self, n: u128) -> Value {
        match self {
            Kind::Int(_) => json!(n as u64),
            Kind::Ipv4 => json!(Ipv4Addr::from(n as u32).to_string()),
            Kind::Ipv6 => json!(Ipv6Addr::from(n).to_string()),
            Kind::Mac => {
                let b = (n as u64).to_be_bytes();
                json!(b[2..].iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":"))
            }
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Int(_) => "a number",
            Kind::Ipv4 => "an IPv4 address",
            Kind::Ipv6 => "an IPv6 address",
            Kind::Mac => "a MAC address (aa:bb:cc:dd:ee:ff)",
        }
    }

    fn max(self) -> u128 {
        match self {
            Kind::Int(b) => (1u128 << b) - 1,
            Kind::Ipv4 => u32::MAX as u128,
            Kind::Ipv6 => u128::MAX,
            Kind::Mac => (1u128 << 48) - 1,
        }
    }
}

/// Reads the pattern object at `path` (`None` or `auto`: the template's default).
pub fn read(p: Option<&Value>, path: &str, kind: Kind, field: &str) -> Result<Pattern, Invalid> {
    let none = Pattern { first: None, op: None };
    let Some(p) = p else { return Ok(none) };
    let choice = p["choice"]
        .as_str()
        .unwrap_or(if p.get("value").is_some() { "value" } else { "auto" });
    match choice {
        "auto" => Ok(none),
        "value" => {
            let n = kind.parse(&p["value"], &format!("{path}.value"))?;
            Ok(Pattern {
                first: Some(kind.show(n)),
                op: None,
            })
        }
        "values" => {
            let list = p["values"]
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| Invalid(format!("{path}.values: give a non-empty list")))?;
            let vals = list
                .iter()
                .enumerate()
                .map(|(i, v)| kind.parse(v, &format!("{path}.values[{i}]")).map(|n| kind.show(n)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(cycle(field, vals))
        }
        "random" => random_op(&p["random"], &format!("{path}.random"), kind, field),
        "increment" | "decrement" => step_op(
            &p[choice],
            &format!("{path}.{choice}"),
            kind,
            field,
            choice == "increment",
        ),
        other => Err(Invalid(format!(
            "{path}.choice: {other:?} is not supported (value, values, increment, decrement, random or auto)"
        ))),
    }
}

fn step_op(p: &Value, path: &str, kind: Kind, field: &str, up: bool) -> Result<Pattern, Invalid> {
    let start = match p.get("start") {
        Some(v) => kind.parse(v, &format!("{path}.start"))?,
        None => return Err(Invalid(format!("{path}.start: give the first value"))),
    };
    let step = p
        .get("step")
        .map_or(Ok(1), |v| kind.parse(v, &format!("{path}.step")))?;
    let count = p.get("count").and_then(num).unwrap_or(1).max(1) as u128;
    if step == 0 || count == 1 {
        return Ok(Pattern {
            first: Some(kind.show(start)),
            op: None,
        });
    }
    let span = step.checked_mul(count).map(|s| s - 1);
    let (from, to) = match span {
        Some(span) if up && start.checked_add(span).is_some_and(|e| e <= kind.max()) => (start, start + span),
        Some(span) if !up && start >= span => (start - span, start),
        _ => {
            return Err(Invalid(format!(
                "{path}: {count} values {} by {step} from {} leave the field's range",
                if up { "up" } else { "down" },
                kind.show(start)
            )))
        }
    };
    if matches!(kind, Kind::Ipv6) && from >> 64 != to >> 64 {
        return Err(Invalid(format!(
            "{path}: gapless varies the low 64 bits of an IPv6 address; keep the range inside one /64"
        )));
    }
    let mut op = Map::new();
    op.insert("field".into(), json!(field));
    op.insert("op".into(), json!(if up { "inc" } else { "dec" }));
    op.insert("from".into(), kind.show(from));
    op.insert("to".into(), kind.show(to));
    op.insert("step".into(), json!(step as u64));
    Ok(Pattern {
        first: Some(kind.show(start)),
        op: Some(op),
    })
}

/// Values a `random` pattern may make at most (its `count`): they are drawn here, once, and
/// cycled by a `list` op, so the run and its stored profile hold them all.
pub const RANDOM_MAX_COUNT: u64 = 65_536;

/// `random {min, max, seed, count}` (and `step`, where a model version has it): `count`
/// values drawn uniformly from `min, min+step, ..., <= max` by a generator seeded with `seed`,
/// then repeated in that order. The same seed gives the same sequence; seed 0 asks for a
/// sequence that differs from run to run (seeded from the clock).
fn random_op(p: &Value, path: &str, kind: Kind, field: &str) -> Result<Pattern, Invalid> {
    use rand::{RngExt, SeedableRng};
    let bound = |k: &str, dflt: u128| p.get(k).map_or(Ok(dflt), |v| kind.parse(v, &format!("{path}.{k}")));
    let (min, max) = (bound("min", 0)?, bound("max", kind.max())?);
    let step = bound("step", 1)?.max(1);
    if min > max {
        return Err(Invalid(format!(
            "{path}: min {} is above max {}",
            kind.show(min),
            kind.show(max)
        )));
    }
    let count = p.get("count").and_then(num).unwrap_or(1).max(1);
    if count > RANDOM_MAX_COUNT {
        return Err(Invalid(format!(
            "{path}.count: {count} values; gapless draws at most {RANDOM_MAX_COUNT}. Fix: a smaller count (the sequence repeats)"
        )));
    }
    let seed = match p.get("seed").and_then(num).unwrap_or(1) {
        0 => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        s => s,
    };
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let slots = (max - min) / step;
    let vals: Vec<Value> = (0..count)
        .map(|_| kind.show(min + step * rng.random_range(0..=slots)))
        .collect();
    Ok(cycle(field, vals))
}

/// A field cycling through `vals` (non-empty): the first as the template's value, and a
/// `list` op when there is more than one.
fn cycle(field: &str, vals: Vec<Value>) -> Pattern {
    let first = Some(vals[0].clone());
    if vals.len() == 1 {
        return Pattern { first, op: None };
    }
    let mut op = Map::new();
    op.insert("field".into(), json!(field));
    op.insert("op".into(), json!("list"));
    op.insert("values".into(), json!(vals));
    Pattern { first, op: Some(op) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(p: Value) -> Result<Pattern, Invalid> {
        read(
            Some(&json!({ "choice": "random", "random": p })),
            "f.src_port",
            Kind::Int(16),
            "src_port",
        )
    }

    fn values(p: &Pattern) -> Vec<u64> {
        let op = p.op.as_ref().expect("a list op");
        assert_eq!(op["op"], "list", "{op:?}");
        op["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    }

    #[test]
    fn random_draws_count_values_in_bounds_and_a_seed_repeats_them() {
        let a = values(&random(json!({ "min": 1000, "max": 1010, "seed": 7, "count": 500 })).unwrap());
        assert_eq!(a.len(), 500, "expected count values");
        assert!(
            a.iter().all(|v| (1000..=1010).contains(v)),
            "expected every value in [1000, 1010]; got {a:?}"
        );
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert_eq!(
            distinct.len(),
            11,
            "expected 500 draws to cover all 11 values; got {distinct:?}"
        );
        let b = values(&random(json!({ "min": 1000, "max": 1010, "seed": 7, "count": 500 })).unwrap());
        assert_eq!(a, b, "expected the same seed to give the same sequence");
        let c = values(&random(json!({ "min": 1000, "max": 1010, "seed": 8, "count": 500 })).unwrap());
        assert_ne!(a, c, "expected another seed to give another sequence");
        let stepped = values(&random(json!({ "min": 10, "max": 20, "step": 5, "count": 50 })).unwrap());
        assert!(
            stepped.iter().all(|v| [10, 15, 20].contains(v)),
            "expected min + k*step; got {stepped:?}"
        );
    }

    #[test]
    fn random_with_one_value_is_a_constant_and_bad_bounds_are_refused_with_their_path() {
        let one = random(json!({ "min": 5, "max": 5 })).unwrap();
        assert!(one.op.is_none() && one.first == Some(json!(5)), "expected a constant 5");
        let e = random(json!({ "min": 9, "max": 3 })).err().unwrap().0;
        assert!(e.contains("f.src_port.random: min 9 is above max 3"), "{e}");
        let e = random(json!({ "count": RANDOM_MAX_COUNT + 1 })).err().unwrap().0;
        assert!(e.contains("f.src_port.random.count") && e.contains("Fix"), "{e}");
        let e = random(json!({ "max": 70000 })).err().unwrap().0;
        assert!(e.contains("does not fit in 16 bits"), "{e}");
    }
}
