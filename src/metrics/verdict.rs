//! The qualification verdict's families, from each target's verdict (as of its latest results
//! write) at scrape time.
//!
//! A gate's state is a state set (`nvsoak_qualification_gate_state{target,gate,state}`, 1 for
//! the state it is in, 0 for the other two), not one gauge with a coded value: a coded
//! "-1 = not evaluated" would read as a number in `min()`/`avg()` and in Grafana, and a state
//! set lets an alert select `state="fail"` and a dashboard count `state="not_evaluated"`.
//! Gates turned off in the config have no series.

use prometheus::proto::MetricFamily;

use super::{Family, push};
use crate::verdict::{GateState, PlanState, Verdict};

const STATES: [(GateState, &str); 3] = [
    (GateState::Pass, "pass"),
    (GateState::Fail, "fail"),
    (GateState::NotEvaluated, "not_evaluated"),
];

/// The families of the targets that have a verdict.
pub fn families_of(snaps: &[crate::workload::scheduler::TargetSnapshot]) -> Vec<MetricFamily> {
    let v: Vec<(String, Verdict)> = snaps
        .iter()
        .filter_map(|s| Some((s.name.clone(), s.verdict.clone()?)))
        .collect();
    families(&v)
}

/// `(target, verdict)` for each target that has one.
pub fn families(verdicts: &[(String, Verdict)]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let mut passed = Family::gauge(
        "nvsoak_qualification_passed",
        "1 while the target's qualification verdict is PASS (no gate failed), 0 once it is FAIL; final once nvsoak_qualification_finished is 1 (the results file's verdict).",
    );
    let mut finished = Family::gauge(
        "nvsoak_qualification_finished",
        "1 once the target's plan ran to its end (its verdict is final), 0 while it runs or after it stopped early.",
    );
    let mut at = Family::gauge(
        "nvsoak_qualification_evaluated_timestamp_seconds",
        "Unix time the target's gates were last evaluated (at each results file write).",
    );
    let mut gate = Family::gauge(
        "nvsoak_qualification_gate_state",
        "State set of each qualification gate: 1 for the state the gate is in (pass, fail, not_evaluated: no data for it), 0 for the others; gates turned off have no series.",
    );
    for (target, v) in verdicts {
        let t = target.as_str();
        passed.add(&[("target", t)], if v.passed { 1.0 } else { 0.0 });
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
            for (s, name) in STATES {
                gate.add(
                    &[("target", t), ("gate", g.gate.name()), ("state", name)],
                    if g.state == s { 1.0 } else { 0.0 },
                );
            }
        }
    }
    push(&mut out, passed);
    push(&mut out, finished);
    push(&mut out, at);
    push(&mut out, gate);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Gate, GateResult};

    #[test]
    fn one_state_set_per_gate_and_the_headline() {
        let v = Verdict {
            passed: false,
            plan: PlanState::Finished,
            evaluated_at: 1_700_000_000.0,
            gates: vec![
                GateResult {
                    gate: Gate::IoErrors,
                    state: GateState::Fail,
                    ..Default::default()
                },
                GateResult {
                    gate: Gate::CriticalWarning,
                    state: GateState::NotEvaluated,
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
        let text = crate::metrics::encode_text(&families(&[("disk0".into(), v)])).expect("text");
        for want in [
            "nvsoak_qualification_passed{target=\"disk0\"} 0",
            "nvsoak_qualification_finished{target=\"disk0\"} 1",
            "nvsoak_qualification_evaluated_timestamp_seconds{target=\"disk0\"} 1700000000",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"io_errors\",state=\"fail\"} 1",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"io_errors\",state=\"pass\"} 0",
            "nvsoak_qualification_gate_state{target=\"disk0\",gate=\"critical_warning\",state=\"not_evaluated\"} 1",
        ] {
            assert!(text.contains(want), "missing {want}:\n{text}");
        }
        assert!(
            !text.contains("gate=\"link\""),
            "an off gate has no series:\n{text}"
        );
        assert!(families(&[]).is_empty(), "no verdict, no families");
    }
}
