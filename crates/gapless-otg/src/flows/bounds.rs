//! Totals over a whole config (issue 68), checked before anything is planned: each protocol's
//! route prefixes summed over every device, peer or interface, range and block, and the
//! values every `random` pattern draws, summed over fields and flows. The per-item bounds
//! (a BGP block's 1,000,000 prefixes, an OSPF block's 4,096, a random pattern's 65,536
//! values) stay where they are checked; these keep a config of many items from asking the
//! same again and again. At the bound plus one the config is refused at once, naming the
//! item that crossed it and the limit.
use serde_json::Value;

use crate::error::Invalid;
use crate::flows::patterns::num;

/// Prefixes a config may advertise with BGP, over every router, peer, range and block: what
/// one block may already ask.
pub const BGP_PREFIXES: u64 = 1_000_000;
/// Prefixes over every IS-IS router and range (each is a kernel route line in the router's
/// namespace).
pub const ISIS_PREFIXES: u64 = 100_000;
/// Prefixes over every OSPFv2 and OSPFv3 range (each an address on a stub interface): what
/// one block may already ask.
pub const OSPF_PREFIXES: u64 = 4_096;
/// Values all `random` patterns of a config draw together (16 patterns at their largest).
pub const RANDOM_VALUES: u64 = 1_048_576;

/// The totals of `cfg`, refused at the first item that takes one over its bound.
pub fn check(cfg: &Value) -> Result<(), Invalid> {
    let mut t = Totals::default();
    walk(cfg, "", &mut t)
}

#[derive(Default)]
struct Totals {
    bgp: u64,
    isis: u64,
    ospf: u64,
    random: u64,
}

fn walk(v: &Value, path: &str, t: &mut Totals) -> Result<(), Invalid> {
    match v {
        Value::Array(items) => {
            for (k, x) in items.iter().enumerate() {
                walk(x, &format!("{path}[{k}]"), t)?;
            }
            Ok(())
        }
        Value::Object(m) => {
            if m.get("choice").and_then(Value::as_str) == Some("random") {
                let count = m["random"].get("count").and_then(num).unwrap_or(1).max(1);
                add(
                    &mut t.random,
                    count,
                    RANDOM_VALUES,
                    &format!("{path}.random.count"),
                    "values drawn by random patterns",
                )?;
            }
            for (k, x) in m {
                let at = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if k == "v4_routes" || k == "v6_routes" {
                    ranges(x, &at, t)?;
                }
                walk(x, &at, t)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A list of route ranges at `path`, each range's blocks counted for the protocol the list
/// is under.
fn ranges(list: &Value, path: &str, t: &mut Totals) -> Result<(), Invalid> {
    let (total, limit, what) = if path.contains(".bgp.") {
        (&mut t.bgp, BGP_PREFIXES, "BGP prefixes")
    } else if path.contains(".isis.") {
        (&mut t.isis, ISIS_PREFIXES, "IS-IS prefixes")
    } else if path.contains(".ospfv2.") || path.contains(".ospfv3.") {
        (&mut t.ospf, OSPF_PREFIXES, "OSPF prefixes")
    } else {
        return Ok(());
    };
    for (r, range) in list.as_array().into_iter().flatten().enumerate() {
        for (b, a) in range["addresses"].as_array().into_iter().flatten().enumerate() {
            let count = a.get("count").and_then(num).unwrap_or(1);
            add(total, count, limit, &format!("{path}[{r}].addresses[{b}].count"), what)?;
        }
    }
    Ok(())
}

fn add(total: &mut u64, n: u64, limit: u64, at: &str, what: &str) -> Result<(), Invalid> {
    *total = total.saturating_add(n);
    if *total > limit {
        let fix = if at.ends_with(".random.count") {
            "smaller random counts, or fewer random fields (the limit is per config, summed over every field and flow)"
        } else {
            "fewer or smaller blocks (the limit is per config, summed over every device and range)"
        };
        return Err(Invalid(format!(
            "{at}: the config's {what} reach {} here, over the {limit} a config may have. Fix: {fix}",
            *total
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A config of `devices` devices, each with a BGP peer of one range of `per` prefixes.
    fn bgp(devices: usize, per: u64) -> Value {
        let d: Vec<Value> = (0..devices)
            .map(|i| {
                json!({ "name": format!("d{i}"), "bgp": { "ipv4_interfaces": [{ "peers": [{ "v4_routes": [
                    { "name": format!("r{i}"), "addresses": [{ "address": "10.0.0.0", "prefix": 24, "count": per }] }] }] }] } })
            })
            .collect();
        json!({ "devices": d })
    }

    #[test]
    fn bgp_prefixes_are_summed_over_devices_and_refused_at_the_bound_plus_one() {
        check(&bgp(4, BGP_PREFIXES / 4)).expect("at the bound: taken");
        let mut over = bgp(4, BGP_PREFIXES / 4);
        over["devices"][3]["bgp"]["ipv4_interfaces"][0]["peers"][0]["v4_routes"][0]["addresses"][0]["count"] =
            json!(BGP_PREFIXES / 4 + 1);
        let e = check(&over).expect_err("one over").0;
        let at = "devices[3].bgp.ipv4_interfaces[0].peers[0].v4_routes[0].addresses[0].count";
        assert!(
            e.starts_with(at) && e.contains("reach 1000001 here, over the 1000000"),
            "got {e}"
        );
    }

    #[test]
    fn ospf_and_isis_ranges_count_for_their_own_protocol() {
        let block = |n: u64| json!([{ "address": "10.0.0.0", "prefix": 32, "count": n }]);
        let cfg = |ospf: u64, isis: u64| {
            json!({ "devices": [{ "ospfv2": { "v4_routes": [{ "addresses": block(ospf) }] },
                                  "isis": { "v4_routes": [{ "addresses": block(isis) }] } }] })
        };
        check(&cfg(OSPF_PREFIXES, ISIS_PREFIXES)).expect("at both bounds");
        let e = check(&cfg(OSPF_PREFIXES + 1, 1)).expect_err("ospf over").0;
        assert!(
            e.starts_with("devices[0].ospfv2.v4_routes[0].addresses[0].count") && e.contains("OSPF prefixes"),
            "got {e}"
        );
        let e = check(&cfg(1, ISIS_PREFIXES + 1)).expect_err("isis over").0;
        assert!(e.contains("IS-IS prefixes reach 100001"), "got {e}");
    }

    #[test]
    fn random_values_are_summed_over_fields_and_flows() {
        let field = |n: u64| json!({ "choice": "random", "random": { "count": n } });
        let flows = |last: u64| {
            let mut f: Vec<Value> = (0..15)
                .map(|_| json!({ "packet": [{ "ipv4": { "src": field(65_536) } }] }))
                .collect();
            f.push(json!({ "packet": [{ "udp": { "src_port": field(last) } }] }));
            json!({ "flows": f })
        };
        check(&flows(65_536)).expect("16 x 65,536: at the bound");
        let e = check(&flows(65_537)).expect_err("one over").0;
        assert!(
            e.starts_with("flows[15].packet[0].udp.src_port.random.count")
                && e.contains("over the 1048576")
                && e.contains("Fix: smaller random counts"),
            "got {e}"
        );
    }
}
