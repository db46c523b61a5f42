//! IS-IS authentication (RFC 5304 HMAC-MD5, or a clear password): `router_auth`'s area key
//! (level 1) and domain key (level 2) and each interface's hello key, read and checked, and
//! written as isisd's `area-password`, `domain-password` and `isis password` lines. A key
//! reaches FRR only as one word of printable ASCII ([`crate::frr::gate::word`]), or the
//! config is refused naming its path.

use std::fmt::Write;

use serde_json::Value;

use crate::error::Invalid;

/// One key and how it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// HMAC-MD5 (RFC 5304).
    Md5(String),
    /// A clear-text password (ISO 10589).
    Clear(String),
}

impl Auth {
    /// isisd's words for it: `md5 KEY` or `clear KEY`.
    pub fn frr(&self) -> String {
        match self {
            Auth::Md5(k) => format!("md5 {k}"),
            Auth::Clear(k) => format!("clear {k}"),
        }
    }
}

/// The router's area and domain keys (`router_auth`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterAuth {
    pub area: Option<Auth>,
    pub domain: Option<Auth>,
}

/// An `IsisAuthenticationBase` or `IsisInterfaceAuthentication` at `at`: none when absent.
pub fn read(v: &Value, at: &str) -> Result<Option<Auth>, Invalid> {
    if v.is_null() {
        return Ok(None);
    }
    let (field, md5) = match v["auth_type"].as_str() {
        Some("md5") => ("md5", true),
        Some("password") => ("password", false),
        other => return Err(Invalid(format!("{at}.auth_type: {other:?}; give md5 or password"))),
    };
    let key = v[field].as_str().unwrap_or_default();
    if !crate::frr::gate::word(key) {
        return Err(Invalid(format!(
            "{at}.{field}: give a key of 1 to 80 printable ASCII characters without spaces (isisd takes it as one word)"
        )));
    }
    Ok(Some(if md5 {
        Auth::Md5(key.into())
    } else {
        Auth::Clear(key.into())
    }))
}

/// `router_auth` at `at`, and a warning when `ignore_receive_md5` is left true (the model's
/// default) with a key set: isisd checks what it receives against its keys anyway.
pub fn router(v: &Value, at: &str, warnings: &mut Vec<String>) -> Result<RouterAuth, Invalid> {
    let a = RouterAuth {
        area: read(&v["area_auth"], &format!("{at}.area_auth"))?,
        domain: read(&v["domain_auth"], &format!("{at}.domain_auth"))?,
    };
    let ignore = v["ignore_receive_md5"].as_bool().unwrap_or(true);
    if ignore && (a.area.is_some() || a.domain.is_some()) {
        warnings.push(format!(
            "{at}.ignore_receive_md5: isisd checks the keys of the LSPs and SNPs it receives anyway, so a peer with another key is not heard; set it to false to say so"
        ));
    }
    Ok(a)
}

/// The router's `area-password` and `domain-password` lines (inside `router isis`).
pub fn router_lines(c: &mut String, a: &RouterAuth) {
    if let Some(k) = &a.area {
        let _ = writeln!(c, " area-password {}", k.frr());
    }
    if let Some(k) = &a.domain {
        let _ = writeln!(c, " domain-password {}", k.frr());
    }
}

/// An interface's `isis password` line (its hellos).
pub fn interface_line(c: &mut String, a: Option<&Auth>) {
    if let Some(k) = a {
        let _ = writeln!(c, " isis password {}", k.frr());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_become_isisd_lines_and_a_bad_key_is_refused_by_its_path() {
        let mut w = Vec::new();
        let a = router(
            &json!({ "ignore_receive_md5": false,
                     "area_auth": { "auth_type": "md5", "md5": "k3y!" },
                     "domain_auth": { "auth_type": "password", "password": "dom" } }),
            "r.router_auth",
            &mut w,
        )
        .unwrap();
        let mut c = String::new();
        router_lines(&mut c, &a);
        interface_line(
            &mut c,
            read(&json!({ "auth_type": "md5", "md5": "h" }), "i").unwrap().as_ref(),
        );
        assert_eq!(
            c,
            " area-password md5 k3y!\n domain-password clear dom\n isis password md5 h\n"
        );
        assert!(w.is_empty(), "{w:?}");
        for (v, path) in [
            (json!({ "auth_type": "md5", "md5": "two words" }), "i.md5"),
            (json!({ "auth_type": "md5", "md5": "a\nlog file /tmp/x" }), "i.md5"),
            (json!({ "auth_type": "password" }), "i.password"),
            (json!({ "auth_type": "sha" }), "i.auth_type"),
        ] {
            let e = read(&v, "i").expect_err("refused").0;
            assert!(e.starts_with(path), "expected {path} refused; got {e}");
        }
        router(&json!({ "area_auth": { "auth_type": "md5", "md5": "k" } }), "r", &mut w).unwrap();
        assert!(
            w.len() == 1 && w[0].starts_with("r.ignore_receive_md5"),
            "expected the default's warning; got {w:?}"
        );
    }
}
