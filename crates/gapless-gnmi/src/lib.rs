//! The OTG YANG models' state trees for gNMI (issue 59), sans IO: the schema every path is
//! checked against ([`schema`], from the models at one pinned commit), gNMI paths with their
//! keys and wildcards ([`path`]), and the leaves of the trees with values typed as their YANG
//! leaves are ([`state`]), made from the same `monitor/metrics` JSON the OTG API answers, so
//! the two can never disagree; one Subscribe stream's bookkeeping ([`subscribe`]) and the
//! JSON encodings ([`json`]). The server that speaks gNMI (gapless-serve's `gnmi`) is not here.

pub mod json;
pub mod keyless;
pub mod path;
pub mod schema;
pub mod state;
pub mod subscribe;

#[cfg(test)]
pub(crate) mod testing {
    use super::path::Path;
    use super::state::{Leaf, Scalar};

    /// The leaf at `p` (`flows/flow[name=f1]/state/...`) with `v`.
    pub fn leaf(p: &str, v: Scalar) -> Leaf {
        Leaf {
            path: Path::parse(p).unwrap(),
            value: v,
        }
    }
}
