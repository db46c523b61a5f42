//! How a controller trusts an agent's self-signed certificate before it sends the agent its
//! token. The controller takes the certificate the agent's listener shows (no CA involved),
//! sends a fresh nonce to `GET /gapless/agent/v1/hello`, and the agent answers
//! HMAC-SHA256(token, "gapless agent v1" ‖ nonce ‖ SHA-256(its certificate)). Only a holder
//! of the token can answer for a certificate, so a machine in the middle, which must show a
//! certificate of its own, cannot answer for it; the controller then pins that certificate
//! for every call and only then sends the token. The nonce makes an old answer worthless.

use ring::{digest, hmac};

const LABEL: &[u8] = b"gapless agent v1";

fn key(token: &str) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes())
}

fn message(nonce: &[u8], cert_der: &[u8]) -> Vec<u8> {
    let mut m = LABEL.to_vec();
    m.extend_from_slice(nonce);
    m.extend_from_slice(digest::digest(&digest::SHA256, cert_der).as_ref());
    m
}

/// The agent's answer for `nonce`, hex.
pub fn proof(token: &str, nonce: &[u8], cert_der: &[u8]) -> String {
    hex(hmac::sign(&key(token), &message(nonce, cert_der)).as_ref())
}

/// Whether `answer` is the proof for `nonce` and the certificate seen (constant time).
pub fn verify(token: &str, nonce: &[u8], cert_der: &[u8], answer: &str) -> bool {
    let Some(tag) = unhex(answer) else {
        return false;
    };
    hmac::verify(&key(token), &message(nonce, cert_der), &tag).is_ok()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_and_the_certificate_seen_make_the_proof() {
        let (nonce, cert) = (b"0123456789abcdef".as_slice(), b"certificate".as_slice());
        let p = proof("secret-token-123", nonce, cert);
        assert!(verify("secret-token-123", nonce, cert, &p));
        assert!(!verify("other-token-1234", nonce, cert, &p), "a wrong token");
        assert!(
            !verify("secret-token-123", nonce, b"another cert", &p),
            "a certificate in the middle"
        );
        assert!(
            !verify("secret-token-123", b"another nonce..", cert, &p),
            "a replayed answer"
        );
        assert!(!verify("secret-token-123", nonce, cert, "zz"), "not hex");
        assert_eq!(unhex(&hex(&[0, 1, 0xfe])), Some(vec![0, 1, 0xfe]));
    }
}
