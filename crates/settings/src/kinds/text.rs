//! Kinds whose values are text with a shape: hexadecimal keys, the job
//! secret, addresses, paths.

use std::net::IpAddr;

use super::{Kind, Problem};

/// A 64-bit number in hexadecimal: up to 16 digits, optionally after
/// `0x` (the job key).
#[derive(Debug, Clone, Copy)]
pub struct Hex64;

impl Kind for Hex64 {
    type Value = u64;
    fn name(&self) -> String {
        "hex".into()
    }
    fn noun(&self) -> &'static str {
        "a hexadecimal number"
    }
    fn accepted(&self) -> String {
        "up to 16 hexadecimal digits, with or without 0x (e.g. 0x5eed)".into()
    }
    fn parse(&self, text: &str) -> Result<u64, Problem> {
        let t = text.trim();
        let digits = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Problem::Malformed);
        }
        // Leading zeros are fine (the old reader took them); 17 significant
        // digits are not.
        u64::from_str_radix(digits, 16)
            .map_err(|_| Problem::OutOfRange("larger than 64 bits".into()))
    }
    fn canonical(&self, v: &u64) -> String {
        format!("{v:016x}")
    }
}

/// The job secret: exactly 32 hexadecimal digits (16 bytes). Never shown.
#[derive(Debug, Clone, Copy)]
pub struct Secret;

impl Kind for Secret {
    type Value = String;
    fn name(&self) -> String {
        "secret".into()
    }
    fn noun(&self) -> &'static str {
        "a job secret"
    }
    fn accepted(&self) -> String {
        "exactly 32 hexadecimal digits (e.g. the output of openssl rand -hex 16)".into()
    }
    fn parse(&self, text: &str) -> Result<String, Problem> {
        let t = text.trim();
        if t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(t.to_ascii_lowercase())
        } else {
            Err(Problem::Malformed)
        }
    }
    fn canonical(&self, v: &String) -> String {
        v.clone()
    }
    fn hidden(&self) -> bool {
        true
    }
}

/// An IPv4 or IPv6 address.
#[derive(Debug, Clone, Copy)]
pub struct Ip;

impl Kind for Ip {
    type Value = IpAddr;
    fn name(&self) -> String {
        "IP address".into()
    }
    fn noun(&self) -> &'static str {
        "an IP address"
    }
    fn accepted(&self) -> String {
        "an IPv4 or IPv6 address (e.g. 10.0.0.5)".into()
    }
    fn parse(&self, text: &str) -> Result<IpAddr, Problem> {
        text.trim().parse().map_err(|_| Problem::Malformed)
    }
    fn canonical(&self, v: &IpAddr) -> String {
        v.to_string()
    }
}

/// `host:port`, the host a name or an address (IPv6 in brackets). Only
/// the form is checked here: whether the name resolves is the
/// bootstrap's business, when it connects.
#[derive(Debug, Clone, Copy)]
pub struct HostPort;

impl Kind for HostPort {
    type Value = String;
    fn name(&self) -> String {
        "host:port".into()
    }
    fn noun(&self) -> &'static str {
        "a host:port address"
    }
    fn accepted(&self) -> String {
        "a host name or address, a colon and a port number (e.g. node0:29500, [fe80::1]:29500)"
            .into()
    }
    fn parse(&self, text: &str) -> Result<String, Problem> {
        let t = text.trim();
        let (host, port) = t.rsplit_once(':').ok_or(Problem::Malformed)?;
        let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => {
                !host.is_empty()
                    && !host.contains(':')
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            }
        };
        if !host_ok || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Problem::Malformed);
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(t.to_string()),
            _ => Err(Problem::OutOfRange(
                "not a port number from 1 to 65535".into(),
            )),
        }
    }
    fn canonical(&self, v: &String) -> String {
        v.clone()
    }
}

/// Free text: a path or a name; anything that is not blank.
#[derive(Debug, Clone, Copy)]
pub struct Text {
    /// What the text names, for listings ("path").
    pub what: &'static str,
}

impl Kind for Text {
    type Value = String;
    fn name(&self) -> String {
        self.what.into()
    }
    fn noun(&self) -> &'static str {
        "a text"
    }
    fn accepted(&self) -> String {
        format!("a {}", self.what)
    }
    fn parse(&self, text: &str) -> Result<String, Problem> {
        Ok(text.trim().to_string())
    }
    fn canonical(&self, v: &String) -> String {
        v.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(Hex64.parse("0x5eed"), Ok(0x5eed));
        assert_eq!(Hex64.parse("00000000DEADBEEF"), Ok(0xdead_beef));
        assert_eq!(Hex64.parse("0x"), Err(Problem::Malformed));
        assert_eq!(
            Hex64.parse("12345678901234567"),
            Err(Problem::OutOfRange("larger than 64 bits".into()))
        );
        assert_eq!(Hex64.parse("000000000000000001"), Ok(1));
        assert_eq!(Hex64.parse("+1"), Err(Problem::Malformed));
        assert_eq!(Hex64.canonical(&0x5eed), "0000000000005eed");
        assert_eq!(Secret.parse(&"AB".repeat(16)), Ok("ab".repeat(16)));
        assert_eq!(Secret.parse("abc"), Err(Problem::Malformed));
        assert_eq!(Ip.parse("::1").map(|a| a.to_string()), Ok("::1".into()));
        assert_eq!(Ip.parse("host"), Err(Problem::Malformed));
        assert_eq!(HostPort.parse("node0:29500"), Ok("node0:29500".into()));
        assert_eq!(HostPort.parse("[::1]:80"), Ok("[::1]:80".into()));
        assert_eq!(
            HostPort.parse("127.0.0.1:0"),
            Err(Problem::OutOfRange(
                "not a port number from 1 to 65535".into()
            ))
        );
        for bad in ["node0", ":80", "a b:80", "::1:80", "host:port"] {
            assert_eq!(HostPort.parse(bad), Err(Problem::Malformed), "{bad}");
        }
    }
}
