//! Scraping the guest's `/metrics` through the forwarded port, and parsing the Prometheus text
//! exposition format into samples.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A plain HTTP/1.1 GET to 127.0.0.1:`port`; returns the status code and the (de-chunked) body.
pub fn http_get(port: u16, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write to {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP header end in {} bytes from {addr}", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = &raw[split + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("bad HTTP status line from {addr}: {head:?}"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunked body")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// All samples of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub samples: Vec<Sample>,
    /// `# TYPE` lines: family name → type.
    pub types: BTreeMap<String, String>,
}

fn parse_labels(s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    // s starts right after '{'
    let mut labels = BTreeMap::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if let Some(r) = rest.strip_prefix('}') {
            return Some((labels, r));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        rest = rest[eq + 1..].strip_prefix('"')?;
        let mut val = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => val.push('\n'),
                    other => val.push(other),
                },
                '"' => break i,
                c => val.push(c),
            }
        };
        labels.insert(key, val);
        rest = &rest[end + 1..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        s => s.parse().ok(),
    }
}

impl Metrics {
    /// Parses the text format; lines that do not parse are skipped.
    pub fn parse(text: &str) -> Metrics {
        let mut m = Metrics::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(t) = line.strip_prefix("# TYPE ") {
                let mut it = t.split_whitespace();
                if let (Some(n), Some(ty)) = (it.next(), it.next()) {
                    m.types.insert(n.to_string(), ty.to_string());
                }
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = line[..name_end].to_string();
            let (labels, rest) = if line[name_end..].starts_with('{') {
                match parse_labels(&line[name_end + 1..]) {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let Some(value) = rest.split_whitespace().next().and_then(parse_value) else {
                continue;
            };
            m.samples.push(Sample {
                name,
                labels,
                value,
            });
        }
        m
    }

    /// Samples named `name` whose labels include every `(key, value)` of `with`.
    pub fn find<'a>(
        &'a self,
        name: &'a str,
        with: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// The single sample matching, if exactly one does.
    pub fn get(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let mut it = self.find(name, with);
        let first = it.next()?;
        it.next().is_none().then_some(first.value)
    }

    /// Sum over all samples matching.
    pub fn sum(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let v: Vec<f64> = self.find(name, with).map(|s| s.value).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// Names of every family present (sample names).
    pub fn names(&self) -> std::collections::BTreeSet<&str> {
        self.samples.iter().map(|s| s.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_text_format() {
        let text = "# HELP nvme_up 1 if the last poll succeeded\n# TYPE nvme_up gauge\n\
            nvme_up{device=\"nvme0\"} 1\n\
            nvme_info{device=\"nvme0\",model=\"QEMU \\\"NVMe\\\" Ctrl\",serial=\"S1\"} 1\n\
            nvsoak_ops_total{target=\"a\",op=\"write\"} 1.5e3 1700000000000\n\
            x_bucket{le=\"+Inf\"} 7\nplain 3\nbroken{a=\"b} 1\n";
        let m = Metrics::parse(text);
        assert_eq!(m.types.get("nvme_up").map(String::as_str), Some("gauge"));
        assert_eq!(m.get("nvme_up", &[("device", "nvme0")]), Some(1.0));
        assert_eq!(m.get("nvme_up", &[("device", "nvme1")]), None);
        let info = m.find("nvme_info", &[]).next().expect("info");
        assert_eq!(info.labels["model"], "QEMU \"NVMe\" Ctrl");
        assert_eq!(m.get("nvsoak_ops_total", &[("op", "write")]), Some(1500.0));
        assert_eq!(m.get("x_bucket", &[("le", "+Inf")]), Some(7.0));
        assert_eq!(m.get("plain", &[]), Some(3.0));
        assert!(m.find("broken", &[]).next().is_none());
    }

    #[test]
    fn dechunks() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n").as_deref(),
            Ok(&b"abcde"[..])
        );
        assert!(dechunk(b"5\r\nab").is_err());
    }
}
