//! The drive's own view through the real HTTP endpoint: a replayed OCP drive (the hand-built
//! C0h, C1h, C3h and telemetry header fixtures) polled by the background poller, served by
//! `http::bind`, scraped over HTTP and parsed; a panic ID change and a new telemetry capture
//! show as drive events; `promtool check metrics` finds nothing.

use std::sync::Arc;
use std::time::Duration;

use nvsoak::health::poller::Opener;
use nvsoak::health::{HealthHandle, NoHostIo, spawn_with};
use nvsoak::http::{self, App, ServerOptions};
use nvsoak::nvme::AdminTransport;
use nvsoak::nvme::cmd::OPC_GET_LOG_PAGE;
use nvsoak::nvme::discover::Controller;
use nvsoak::nvme::replay::Reply;

use crate::common::{find, http_get, parse_metrics};

struct HealthApp(HealthHandle);
impl App for HealthApp {
    fn metrics(&self) -> String {
        nvsoak::metrics::encode_text(&nvsoak::metrics::health::families(&self.0.snapshot()))
            .unwrap_or_default()
    }
    fn status_page(&self) -> String {
        String::new()
    }
}

/// The C1h fixture with another panic ID (bytes 4..11) and panic count (byte 31).
fn c1_with(panic_id: u64, count: u8) -> Vec<u8> {
    let mut b = crate::common::nvme_fixture("ocp-c1.bin");
    b[4..12].copy_from_slice(&panic_id.to_le_bytes());
    b[31] = count;
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocp_families_over_http_with_drive_events_and_promtool_clean() {
    let root = tempfile::tempdir().expect("tempdir");
    crate::common::fake_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M");
    let t = crate::common::handbuilt_replay();
    let opener: Opener = {
        let t = Arc::clone(&t);
        Arc::new(move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>))
    };
    let mut settings = nvsoak::config::builtin_default().health;
    settings.poll_interval = Duration::from_secs(3600); // polls on poll_now only
    settings.rescan_interval = Duration::ZERO;
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let h = spawn_with(
        settings,
        Arc::new(NoHostIo),
        stop_rx,
        root.path().to_path_buf(),
        opener,
    );
    h.wait_for_polls(1, Duration::from_secs(20))
        .await
        .expect("first poll");
    // The drive panics and captures new telemetry; the next poll sees both.
    t.on_loose(
        OPC_GET_LOG_PAGE,
        0xc1,
        Reply::Data(c1_with(0x0000_dead_0000_beef, 8), 0),
    );
    let mut tel = crate::common::nvme_fixture("telemetry-08.bin");
    tel[383] = 5;
    t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Data(tel, 0));
    h.poll_now();
    h.wait_for_polls(2, Duration::from_secs(20))
        .await
        .expect("second poll");

    let server = http::bind(
        ServerOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            web_config: None,
            max_connections: 0,
        },
        Arc::new(HealthApp(h.clone())),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    let (code, text) = tokio::task::spawn_blocking(move || http_get(addr, "/metrics"))
        .await
        .expect("join")
        .expect("GET /metrics");
    let _ = stop.send(());
    let _ = task.await;
    assert_eq!(code, 200);
    let s = parse_metrics(&text);
    let one = |name: &str, labels: &[(&str, &str)]| -> f64 {
        let f = find(&s, name, labels);
        assert_eq!(f.len(), 1, "{name}{labels:?}: {f:?}\n{text}");
        f[0].value
    };
    let dev = [("device", "nvme0")];
    let per_drive = s
        .iter()
        .filter(|x| x.labels.get("device").map(String::as_str) == Some("nvme0"))
        .count();
    // docs/fleet.md's cardinality budget (tests/scale.rs holds every drive to it).
    assert!(per_drive <= 120, "{per_drive} series for one OCP drive");
    for log in [
        "ocp_error_recovery",
        "ocp_latency_monitor",
        "telemetry_ctrl",
    ] {
        assert_eq!(
            one(
                "nvsoak_health_log_supported",
                &[("device", "nvme0"), ("log", log)]
            ),
            1.0,
            "{log}"
        );
    }
    let panic = find(&s, "nvme_ocp_panic_info", &dev);
    assert_eq!(panic.len(), 1);
    assert_eq!(panic[0].labels["panic_id"], "0xdead0000beef");
    assert_eq!(one("nvme_ocp_panics_total", &dev), 8.0);
    assert_eq!(one("nvme_ocp_panic_reset_wait_seconds", &dev), 0.258);
    assert_eq!(one("nvme_ocp_latency_monitor_enabled", &dev), 1.0);
    // Fixture: counter (set s, bucket i, op k) = s*1000 + i*10 + k.
    fn b<'a>(set: &'a str, bucket: &'a str, op: &'a str) -> [(&'a str, &'a str); 4] {
        [
            ("device", "nvme0"),
            ("set", set),
            ("bucket", bucket),
            ("op", op),
        ]
    }
    assert_eq!(
        one(
            "nvme_ocp_latency_bucket_commands",
            &b("active", "1", "write")
        ),
        1012.0
    );
    assert_eq!(
        one(
            "nvme_ocp_latency_bucket_commands",
            &b("static", "3", "deallocate")
        ),
        2033.0
    );
    assert_eq!(
        find(&s, "nvme_ocp_latency_bucket_commands", &dev).len(),
        2 * 4 * 3
    );
    assert_eq!(one("nvme_telemetry_ctrl_data_generation", &dev), 5.0);
    assert_eq!(one("nvme_telemetry_ctrl_data_available", &dev), 1.0);
    for kind in ["ocp_panic", "telemetry_generation"] {
        assert_eq!(
            one(
                "nvsoak_drive_events_total",
                &[("device", "nvme0"), ("kind", kind)]
            ),
            1.0,
            "{kind}"
        );
    }
    assert!(text.contains("# TYPE nvme_ocp_panics_total counter"));
    assert!(text.contains("# TYPE nvme_ocp_latency_bucket_commands gauge"));
    // promtool lints the whole health output; the drive's-own-view families must be clean.
    let findings = crate::common::promtool_findings(&text);
    let ours = [
        "nvsoak_health_log_supported",
        "nvme_ocp_panic",
        "nvme_ocp_latency",
        "nvme_telemetry",
        "nvsoak_drive_events",
    ];
    let mine: Vec<&str> = findings
        .lines()
        .filter(|l| ours.iter().any(|o| l.contains(o)))
        .collect();
    assert!(
        mine.is_empty(),
        "promtool findings on these families:\n{}\n---\n{text}",
        mine.join("\n")
    );
    // And the rest of the health output is clean too (the day-valued wear-out gauge and the
    // "summary"-named byte 6 gauge were renamed to base units and a plain name).
    assert!(findings.trim().is_empty(), "promtool findings:\n{findings}");
    let snap = h.snapshot();
    let events = &snap.devices[0].pages.events;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e.detail.contains("-> 0xdead0000beef"))
    );
}
