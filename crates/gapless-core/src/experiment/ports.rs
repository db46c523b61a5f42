//! Experiments over several ports (`ports` and `pairs`): which port sends to which (the
//! directions), and the profile made from the user's streams with one copy per direction,
//! each carrying its ports' addresses. The return direction of a pair mirrors the stream:
//! MACs and IP addresses from the ports (so swapped), and the L4 ports and the fields on
//! them swapped.
//!
//! Without `ports`, an experiment is the one-way `tx`/`rx` form, and nothing here changes
//! its profile.

use serde::{Deserialize, Serialize};

use crate::spec::{FieldSpec, ProfileSpec, TemplateSpec};

/// `pairs`: which ports send to which.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Pairs {
    /// `"bidirectional"`: ports 0↔1 (and 2↔3, …), both ways.
    /// `"full-mesh"`: every port to every other.
    Named(PairsKind),
    /// `[{ from = 0, to = 1 }, …]`, or `[[pair]]` tables.
    List(Vec<Pair>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PairsKind {
    Bidirectional,
    FullMesh,
}

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => match s.as_str() {
                "bidirectional" => Ok(Pairs::Named(PairsKind::Bidirectional)),
                "full-mesh" => Ok(Pairs::Named(PairsKind::FullMesh)),
                _ => Err(D::Error::custom(format!(
                    "pairs = {s:?}: give \"bidirectional\", \"full-mesh\", or a list of {{ from = 0, to = 1 }}"
                ))),
            },
            v @ toml::Value::Array(_) => v
                .try_into::<Vec<Pair>>()
                .map(Pairs::List)
                .map_err(|e| D::Error::custom(format!("pairs: {}", e.to_string().trim_end()))),
            v => Err(D::Error::custom(format!(
                "pairs = {v}: give \"bidirectional\", \"full-mesh\", or a list of {{ from = 0, to = 1 }}"
            ))),
        }
    }
}

/// One direction: a port (by index in `ports`, or by its interface's name) to another.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub from: PortId,
    pub to: PortId,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PortId {
    Index(usize),
    Iface(String),
}

impl PortId {
    fn resolve(&self, ports: &[&str], path: &str) -> Result<usize, String> {
        match self {
            PortId::Index(i) if *i < ports.len() => Ok(*i),
            PortId::Index(i) => Err(format!(
                "{path} = {i}: there are {} ports (0 to {})",
                ports.len(),
                ports.len() - 1
            )),
            PortId::Iface(n) => ports
                .iter()
                .position(|p| p == n)
                .ok_or_else(|| format!("{path} = {n:?}: no port has that iface (ports: {ports:?})")),
        }
    }
}

/// A direction of the experiment: the ports' indices and how results name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Direction {
    /// "gl-tx0→gl-rx0".
    pub name: String,
    pub from: usize,
    pub to: usize,
}

/// The directions `pairs` asks of the ports (their interfaces' names, in order); errors name
/// the key.
pub fn directions(ports: &[&str], pairs: &Pairs) -> Result<Vec<Direction>, String> {
    let n = ports.len();
    let list: Vec<(usize, usize)> = match pairs {
        Pairs::Named(PairsKind::Bidirectional) if n % 2 == 1 => {
            return Err(format!(
                "pairs = \"bidirectional\" pairs ports 0↔1, 2↔3, …: give an even number of ports (there are {n})"
            ))
        }
        Pairs::Named(PairsKind::Bidirectional) => (0..n / 2)
            .flat_map(|k| [(2 * k, 2 * k + 1), (2 * k + 1, 2 * k)])
            .collect(),
        Pairs::Named(PairsKind::FullMesh) => (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect(),
        Pairs::List(l) if l.is_empty() => return Err("pairs is empty: give at least one { from, to }".into()),
        Pairs::List(l) => l
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let a = p.from.resolve(ports, &format!("pairs[{i}].from"))?;
                let b = p.to.resolve(ports, &format!("pairs[{i}].to"))?;
                if a == b {
                    return Err(format!("pairs[{i}]: from and to are both port {a}: give two ports"));
                }
                Ok((a, b))
            })
            .collect::<Result<_, String>>()?,
    };
    let mut seen = std::collections::HashSet::new();
    if let Some(&(a, b)) = list.iter().find(|d| !seen.insert(**d)) {
        return Err(format!("pairs: port {a} to port {b} is given twice"));
    }
    Ok(list
        .into_iter()
        .map(|(from, to)| Direction {
            name: format!("{}→{}", ports[from], ports[to]),
            from,
            to,
        })
        .collect())
}

/// The addresses a direction's frames carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectionAddrs {
    pub eth_src: String,
    /// The MAC the sending port reaches the receiving one through (its neighbour entry: the
    /// receiver itself on a bridge, the router's port on a router).
    pub eth_dst: String,
    pub ip_src: String,
    pub ip_dst: String,
}

/// The experiment's profile: each stream of `base` once per direction, in direction order
/// (stream `d * k + s` is base stream `s` in direction `d`), named `STREAM DIRECTION`, with
/// signature ids 0, 1, 2, …, and the direction's addresses. A direction whose reverse comes
/// earlier in the list is that one's mirror: its L4 ports (and the fields on them) swapped.
pub fn expand(base: &ProfileSpec, dirs: &[Direction], addrs: &[DirectionAddrs]) -> Result<ProfileSpec, String> {
    let mut p = base.clone();
    p.streams.clear();
    for (d, dir) in dirs.iter().enumerate() {
        let mirror = dirs[..d].iter().any(|e| e.from == dir.to && e.to == dir.from);
        for (s, st) in base.streams.iter().enumerate() {
            let name = st.name.clone().unwrap_or_else(|| format!("s{s}"));
            let mut c = st.clone();
            c.name = Some(format!("{name} {}", dir.name));
            c.id = Some(u16::try_from(p.streams.len()).map_err(|_| "more than 65536 streams over the directions")?);
            c.core = None;
            let path = format!("profile.stream[{s}]");
            match (&mut c.template, c.variants.is_empty()) {
                (Some(t), _) => address(t, &addrs[d], mirror, &path)?,
                (None, true) => {
                    let mut t = TemplateSpec::default();
                    address(&mut t, &addrs[d], mirror, &path)?;
                    c.template = Some(t);
                }
                (None, false) => {
                    for (v, var) in c.variants.iter_mut().enumerate() {
                        address(&mut var.template, &addrs[d], mirror, &format!("{path}.variant[{v}]"))?;
                        if mirror {
                            var.fields.iter_mut().for_each(swap_field);
                        }
                    }
                }
            }
            if mirror {
                c.fields.iter_mut().for_each(swap_field);
            }
            p.streams.push(c);
        }
    }
    Ok(p)
}

/// The direction of each stream of [`expand`]'s profile.
pub fn stream_directions(base_streams: usize, dirs: usize) -> Vec<usize> {
    (0..dirs).flat_map(|d| std::iter::repeat_n(d, base_streams)).collect()
}

fn address(t: &mut TemplateSpec, a: &DirectionAddrs, mirror: bool, path: &str) -> Result<(), String> {
    if t.frame.is_some() {
        return Err(format!(
            "{path}.template.frame: a whole frame carries its own addresses, and with `ports` each direction takes its ports' addresses. Fix: give the headers as template keys"
        ));
    }
    t.eth_src = a.eth_src.clone();
    t.eth_dst = a.eth_dst.clone();
    t.ip_src = a.ip_src.clone();
    t.ip_dst = a.ip_dst.clone();
    if mirror {
        std::mem::swap(&mut t.src_port, &mut t.dst_port);
    }
    Ok(())
}

/// A field of the forward direction as the mirror has it: sources and destinations swapped.
fn swap_field(f: &mut FieldSpec) {
    let swapped = match f.field.as_str() {
        "mac_src" => "mac_dst",
        "mac_dst" => "mac_src",
        "ip_src" => "ip_dst",
        "ip_dst" => "ip_src",
        "src_port" => "dst_port",
        "dst_port" => "src_port",
        _ => return,
    };
    f.field = swapped.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_name_the_directions() {
        let ports = ["a", "b", "c", "d"];
        let d = directions(&ports, &Pairs::Named(PairsKind::Bidirectional)).unwrap();
        let got: Vec<(usize, usize)> = d.iter().map(|d| (d.from, d.to)).collect();
        assert_eq!(got, vec![(0, 1), (1, 0), (2, 3), (3, 2)]);
        assert_eq!(d[1].name, "b→a");
        assert_eq!(
            directions(&ports, &Pairs::Named(PairsKind::FullMesh)).unwrap().len(),
            12
        );
        let l = Pairs::List(vec![Pair {
            from: PortId::Iface("c".into()),
            to: PortId::Index(0),
        }]);
        assert_eq!(directions(&ports, &l).unwrap()[0].name, "c→a");
        let e = directions(&ports[..3], &Pairs::Named(PairsKind::Bidirectional)).unwrap_err();
        assert!(e.contains("even number"), "{e}");
        let bad = Pairs::List(vec![Pair {
            from: PortId::Iface("x".into()),
            to: PortId::Index(9),
        }]);
        let e = directions(&ports, &bad).unwrap_err();
        assert!(e.starts_with("pairs[0].from = \"x\""), "{e}");
    }

    #[test]
    fn the_return_direction_mirrors_the_stream() {
        let base: ProfileSpec = toml::from_str(
            "[[stream]]\nname = \"m\"\n[stream.template]\nsrc_port = 1000\ndst_port = 2000\n[[stream.field]]\nfield = \"src_port\"\nop = \"inc\"\nfrom = 1000\nto = 1009\n[stream.timing]\nrate_pps = 10\n",
        )
        .unwrap();
        let ports = ["a", "b"];
        let dirs = directions(&ports, &Pairs::Named(PairsKind::Bidirectional)).unwrap();
        let ab = DirectionAddrs {
            eth_src: "02:00:00:00:00:0a".into(),
            eth_dst: "02:00:00:00:00:0b".into(),
            ip_src: "10.0.0.1".into(),
            ip_dst: "10.0.0.2".into(),
        };
        let ba = DirectionAddrs {
            eth_src: ab.eth_dst.clone(),
            eth_dst: ab.eth_src.clone(),
            ip_src: ab.ip_dst.clone(),
            ip_dst: ab.ip_src.clone(),
        };
        let p = expand(&base, &dirs, &[ab, ba]).unwrap();
        let names: Vec<_> = p.streams.iter().map(|s| s.name.clone().unwrap()).collect();
        assert_eq!(names, vec!["m a→b", "m b→a"]);
        assert_eq!(
            p.streams.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![Some(0), Some(1)]
        );
        let (f, r) = (
            p.streams[0].template.as_ref().unwrap(),
            p.streams[1].template.as_ref().unwrap(),
        );
        assert_eq!((f.src_port, f.dst_port, f.ip_src.as_str()), (1000, 2000, "10.0.0.1"));
        assert_eq!((r.src_port, r.dst_port, r.ip_src.as_str()), (2000, 1000, "10.0.0.2"));
        assert_eq!(r.eth_dst, "02:00:00:00:00:0a");
        assert_eq!(p.streams[0].fields[0].field, "src_port");
        assert_eq!(p.streams[1].fields[0].field, "dst_port");
        assert_eq!(stream_directions(1, 2), vec![0, 1]);
    }
}
