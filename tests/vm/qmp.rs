//! A small QMP client: JSON lines over the VM's unix socket.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Asynchronous events seen while waiting for replies (e.g. `DEVICE_DELETED`).
    pub events: Vec<Value>,
}

impl Qmp {
    /// Connects (retrying until the socket appears or `timeout` passes), reads the greeting and
    /// negotiates capabilities.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Qmp, String> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("connecting to {}: {e}", path.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut q = Qmp {
            reader: BufReader::new(stream),
            writer,
            events: Vec::new(),
        };
        let greeting = q.read_value()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("unexpected QMP greeting: {greeting}"));
        }
        q.execute("qmp_capabilities", None)?;
        Ok(q)
    }

    fn read_value(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|e| format!("reading from QMP: {e}"))?;
        if n == 0 {
            return Err("QMP socket closed".into());
        }
        serde_json::from_str(&line).map_err(|e| format!("bad QMP JSON {line:?}: {e}"))
    }

    /// Runs a command and returns its `return` value; a QMP `error` becomes `Err`.
    pub fn execute(&mut self, cmd: &str, args: Option<Value>) -> Result<Value, String> {
        let mut req = json!({ "execute": cmd });
        if let Some(a) = args {
            req["arguments"] = a;
        }
        let mut text = req.to_string();
        text.push('\n');
        self.writer
            .write_all(text.as_bytes())
            .map_err(|e| format!("writing to QMP: {e}"))?;
        loop {
            let v = self.read_value()?;
            if v.get("event").is_some() {
                self.events.push(v);
                continue;
            }
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(format!("QMP {cmd} failed: {e}"));
            }
            return Err(format!("unexpected QMP reply to {cmd}: {v}"));
        }
    }

    /// `qom-set` on `/machine/peripheral/<device>`.
    pub fn qom_set(&mut self, device: &str, property: &str, value: Value) -> Result<(), String> {
        self.execute(
            "qom-set",
            Some(json!({
                "path": format!("/machine/peripheral/{device}"),
                "property": property,
                "value": value,
            })),
        )
        .map(|_| ())
    }

    /// `qom-get` on `/machine/peripheral/<device>`.
    pub fn qom_get(&mut self, device: &str, property: &str) -> Result<Value, String> {
        self.execute(
            "qom-get",
            Some(json!({ "path": format!("/machine/peripheral/{device}"), "property": property })),
        )
    }

    /// Sets the emulated controller's SMART critical warning bits (QEMU allows 0x01..=0x10).
    pub fn set_critical_warning(&mut self, device: &str, bits: u8) -> Result<(), String> {
        self.qom_set(device, "smart_critical_warning", json!(bits))
    }

    /// `device_del`, then waits up to `timeout` for the `DEVICE_DELETED` event for `id`.
    pub fn device_del(&mut self, id: &str, timeout: Duration) -> Result<(), String> {
        self.execute("device_del", Some(json!({ "id": id })))?;
        let deadline = Instant::now() + timeout;
        let is_done =
            |e: &Value| e["event"] == "DEVICE_DELETED" && e["data"]["device"].as_str() == Some(id);
        loop {
            if self.events.iter().any(is_done) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no DEVICE_DELETED event for {id} within {timeout:?}"
                ));
            }
            match self.read_value() {
                Ok(v) => self.events.push(v),
                Err(e)
                    if e.contains("timed out")
                        || e.contains("WouldBlock")
                        || e.contains("Resource temporarily") => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// `device_add` of an NVMe controller on an existing block node (QEMU's PCI hotplug; the
    /// guest's ACPI hotplug driver probes it).
    pub fn nvme_add(&mut self, id: &str, serial: &str, node: &str) -> Result<(), String> {
        self.execute(
            "device_add",
            Some(json!({ "driver": "nvme", "id": id, "serial": serial, "drive": node })),
        )
        .map(|_| ())
    }

    /// `blockdev-add` of a raw image file as node `node`.
    pub fn file_node_add(&mut self, node: &str, path: &Path) -> Result<(), String> {
        self.execute(
            "blockdev-add",
            Some(json!({
                "driver": "file",
                "node-name": node,
                "filename": path.display().to_string(),
            })),
        )
        .map(|_| ())
    }
}
