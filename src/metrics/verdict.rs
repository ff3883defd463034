//! The qualification verdict's families, from each target's verdict at scrape time (the
//! scheduler re-evaluates it every stats interval and after every health poll it sees, so a
//! gate that fails shows within one poll plus one interval).
//!
//! The verdict (`nvsoak_qualification_verdict{target,host,serial,model,firmware,verdict}`) and
//! a gate's state (`nvsoak_qualification_gate_state{target,gate,state}`) are state sets (1 for
//! the state it is in, 0 for the others), not one gauge with a coded value: a coded "-1 = not
//! evaluated" would read as a number in `min()`/`avg()` and in Grafana, and a state set lets an
//! alert select `verdict="fail"` and a dashboard count `state="not_evaluated"`. The verdict
//! carries the drive's identity, so an alert names the drive without a join. Gates turned off
//! in the config have no series.

use prometheus::proto::MetricFamily;

use super::{Family, push};
use crate::model::verdict::{GateState, PlanState, Verdict, VerdictStatus};

const STATES: [GateState; 4] = [
    GateState::Pass,
    GateState::Fail,
    GateState::NotEvaluated,
    GateState::NotApplicable,
];

/// The drive a verdict is about, for its labels ("" for a file target).
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub target: String,
    pub host: String,
    pub serial: String,
    pub model: String,
    pub firmware: String,
    pub verdict: Verdict,
}

/// The families of the targets that have a verdict.
pub fn families_of(snaps: &[crate::workload::scheduler::TargetSnapshot]) -> Vec<MetricFamily> {
    let host = crate::util::host::hostname();
    let v: Vec<Judged> = snaps
        .iter()
        .filter_map(|s| {
            let id = s.drive.identity.as_ref();
            let field = |f: fn(&crate::model::results::DeviceIdentity) -> &String| {
                id.map(|i| f(i).clone()).unwrap_or_default()
            };
            Some(Judged {
                target: s.name.clone(),
                host: host.clone(),
                serial: field(|i| &i.serial),
                model: field(|i| &i.model),
                firmware: field(|i| &i.firmware),
                verdict: s.verdict.clone()?,
            })
        })
        .collect();
    families(&v)
}

/// One target's families for each verdict.
pub fn families(verdicts: &[Judged]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let mut verdict = Family::gauge(
        "nvsoak_qualification_verdict",
        "State set of the target's qualification verdict: 1 for the one it is in (pass: the plan finished and every gate that applies passed; fail: a gate failed; incomplete: stopped before the end, or a gate that applies not evaluated; running: no gate failed yet), 0 for the others; labelled with the host's name and the drive's serial, model and firmware.",
    );
    let mut passed = Family::gauge(
        "nvsoak_qualification_passed",
        "1 only when the target's verdict is PASS (the plan finished and every gate that applies was evaluated and passed); 0 while it runs, when INCOMPLETE and when FAIL.",
    );
    let mut finished = Family::gauge(
        "nvsoak_qualification_finished",
        "1 once the target's plan ran to its end (its verdict is final), 0 while it runs or after it stopped early.",
    );
    let mut at = Family::gauge(
        "nvsoak_qualification_evaluated_timestamp_seconds",
        "Unix time the target's gates were last evaluated (every stats interval while the plan runs).",
    );
    let mut gate = Family::gauge(
        "nvsoak_qualification_gate_state",
        "State set of each qualification gate: 1 for the state the gate is in (pass, fail, not_evaluated: it applies but its data is missing, not_applicable: it does not apply to this target), 0 for the others; gates turned off have no series.",
    );
    let mut value = Family::gauge(
        "nvsoak_qualification_gate_value",
        "The figure a qualification gate judged, where it is a number (errors, °C, %, IOPS, bytes of difference); no series before it is evaluated.",
    );
    let mut limit = Family::gauge(
        "nvsoak_qualification_gate_limit",
        "The limit a qualification gate's figure is judged against, where it is a number; no series before it is evaluated.",
    );
    for j in verdicts {
        let v = &j.verdict;
        let t = j.target.as_str();
        let status = v.status();
        for s in VerdictStatus::ALL {
            verdict.add(
                &[
                    ("target", t),
                    ("host", &j.host),
                    ("serial", &j.serial),
                    ("model", &j.model),
                    ("firmware", &j.firmware),
                    ("verdict", s.label()),
                ],
                if s == status { 1.0 } else { 0.0 },
            );
        }
        passed.add(
            &[("target", t)],
            if status == VerdictStatus::Pass {
                1.0
            } else {
                0.0
            },
        );
        finished.add(
            &[("target", t)],
            if v.plan == PlanState::Finished {
                1.0
            } else {
                0.0
            },
        );
        at.add(&[("target", t)], v.evaluated_at);
        for g in v.gates.iter().filter(|g| g.state != GateState::Off) {
            let name = g.gate.name();
            for s in STATES {
                gate.add(
                    &[("target", t), ("gate", name), ("state", s.label())],
                    if g.state == s { 1.0 } else { 0.0 },
                );
            }
            if let (Some(x), Some(l)) = (g.value, g.threshold) {
                value.add(&[("target", t), ("gate", name)], x);
                limit.add(&[("target", t), ("gate", name)], l);
            }
        }
    }
    push(&mut out, verdict);
    push(&mut out, passed);
    push(&mut out, finished);
    push(&mut out, at);
    push(&mut out, gate);
    push(&mut out, value);
    push(&mut out, limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::verdict::{Gate, GateResult};

    fn judged(v: Verdict) -> Judged {
        Judged {
            target: "disk0".into(),
            host: "rack1".into(),
            serial: "S123".into(),
            model: "M".into(),
            firmware: "F1".into(),
            verdict: v,
        }
    }

    #[test]
    fn one_state_set_per_gate_and_the_verdict() {
        let v = Verdict {
            plan: PlanState::Finished,
            evaluated_at: 1_700_000_000.0,
            gates: vec![
                GateResult {
                    gate: Gate::IoErrors,
                    state: GateState::Fail,
                    value: Some(3.0),
                    threshold: Some(0.0),
                    ..Default::default()
                },
                GateResult {
                    gate: Gate::CriticalWarning,
                    state: GateState::NotEvaluated,
                    ..Default::default()
                },
                GateResult {
                    gate: Gate::Temperature,
                    state: GateState::NotApplicable,
                    ..Default::default()
                },
                GateResult {
                    gate: Gate::Link,
                    state: GateState::Off,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let text = crate::metrics::encode_text(&families(&[judged(v)])).expect("text");
        for want in [
            "nvsoak_qualification_verdict{target=\"disk0\",host=\"rack1\",serial=\"S123\",model=\"M\",firmware=\"F1\",verdict=\"fail\"} 1",
            "nvsoak_qualification_verdict{target=\"disk0\",host=\"rack1\",serial=\"S123\",model=\"M\",firmware=\"F1\",verdict=\"pass\"} 0",
            "nvsoak_qualification_passed{target=\"disk0\"} 0",
            "nvsoak_qualification_finished{target=\"disk0\"} 1",
            "nvsoak_qualification_evaluated_timestamp_seconds{target=\"disk0\"} 1700000000",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"io_errors\",state=\"fail\"} 1",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"io_errors\",state=\"pass\"} 0",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"critical_warning\",state=\"not_evaluated\"} 1",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"temperature\",state=\"not_applicable\"} 1",
            "nvsoak_qualification_gate_value{target=\"disk0\",gate=\"io_errors\"} 3",
            "nvsoak_qualification_gate_limit{target=\"disk0\",gate=\"io_errors\"} 0",
        ] {
            assert!(text.contains(want), "missing {want}:\n{text}");
        }
        assert!(
            !text.contains("gate=\"link\""),
            "an off gate has no series:\n{text}"
        );
        assert!(
            !text.contains(
                "nvsoak_qualification_gate_value{target=\"disk0\",gate=\"critical_warning\""
            ),
            "a gate without a figure has no value series:\n{text}"
        );
        assert!(families(&[]).is_empty(), "no verdict, no families");
    }

    /// A finished plan with a gate not evaluated is INCOMPLETE, never passed.
    #[test]
    fn a_gate_not_evaluated_is_not_passed() {
        let v = Verdict {
            plan: PlanState::Finished,
            gates: vec![
                GateResult {
                    gate: Gate::IoErrors,
                    state: GateState::Pass,
                    ..Default::default()
                },
                GateResult {
                    gate: Gate::VerifyErrors,
                    state: GateState::NotEvaluated,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let text = crate::metrics::encode_text(&families(&[judged(v)])).expect("text");
        assert!(
            text.contains("nvsoak_qualification_passed{target=\"disk0\"} 0"),
            "{text}"
        );
        assert!(text.contains("verdict=\"incomplete\"} 1"), "{text}");
    }
}
