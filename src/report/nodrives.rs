//! Why the status page's drives section is empty, in one sentence: health polling is off, it
//! could not start, the first poll has not finished, or no drive was found. Pure: the daemon
//! passes the health poller's snapshot (or `None` when polling is off).

use crate::health::HealthSnapshot;

/// The reason there are no drives to show, for the status page.
pub fn no_drives_reason(health: Option<&HealthSnapshot>) -> String {
    let Some(h) = health else {
        return "No drive health: health polling is off ([health] enabled = false).".into();
    };
    if let Some(e) = &h.setup_error {
        return format!("No drive health: health polling could not start: {e}.");
    }
    if h.polls == 0 {
        return "No drive health yet: the first health poll has not finished.".into();
    }
    if h.devices.is_empty() && !h.ata.is_empty() {
        return format!(
            "No NVMe controller was found; {} SATA disk(s) are polled (see /metrics, ata_*).",
            h.ata.len()
        );
    }
    format!(
        "No drive health: no NVMe controller was found ({} polls so far; the poller looks in /sys/class/nvme).",
        h.polls
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_is_told_apart() {
        assert!(no_drives_reason(None).contains("health polling is off"));
        let mut h = HealthSnapshot::default();
        assert!(no_drives_reason(Some(&h)).contains("first health poll has not finished"));
        h.polls = 3;
        let r = no_drives_reason(Some(&h));
        assert!(r.contains("no NVMe controller was found (3 polls"), "{r}");
        h.setup_error = Some("bad regex in health.device[0].model".into());
        let r = no_drives_reason(Some(&h));
        assert!(r.contains("could not start: bad regex"), "{r}");
    }
}
