#!/usr/bin/env python3
"""Generates the Grafana dashboards in dashboards/grafana/ (provisionable JSON files).

Run `python3 dashboards/generate.py` after editing (or `... generate.py DIR/grafana` to write
elsewhere); it also writes the verdict panels' promtool test (tests/nvsoak-verdict-panels.test.yml,
beside the grafana directory). scripts/test-ops checks that both are current.
Queries use only metric names nvsoak exports (and the recording rules in
dashboards/rules/nvsoak-recording.yml); tests/it/ops.rs evaluates every one against a real
Prometheus scraping a real nvsoak.

Workload series carry `target` and `workload` (the profile or job name; `job` is left to
Prometheus' scrape job). `nvsoak_target_info{target,path,device}` maps a target to the NVMe
controller it sits on (`device` empty for files): the fleet overview joins target-side series onto
its drive rows through the `nvme:target:info` recording rule, and lists file targets separately.
"""

import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
HERE = os.path.dirname(os.path.abspath(__file__))

# Selectors with the template variables.
W = 'instance=~"$instance", target=~"$target"'
D = 'instance=~"$instance", device=~"$device"'


class Layout:
    def __init__(self):
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1

    def place(self, w, h):
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def newline(self):
        if self.x:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0

    def id(self):
        i = self.next_id
        self.next_id += 1
        return i


def target(ref, expr, legend="", instant=False, fmt=None):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto"}
    if instant:
        t["instant"] = True
        t["range"] = False
    else:
        t["range"] = True
    if fmt:
        t["format"] = fmt
    return t


def refs(queries, instant=False, fmt=None):
    out = []
    for i, q in enumerate(queries):
        expr, legend = q if isinstance(q, tuple) else (q, "")
        out.append(target(chr(ord("A") + i), expr, legend, instant, fmt))
    return out


def row(lay, title):
    lay.newline()
    p = {"type": "row", "title": title, "collapsed": False, "id": lay.id(), "gridPos": lay.place(24, 1), "panels": []}
    lay.newline()
    return p


def timeseries(lay, title, queries, unit=None, w=12, h=8, desc="", thresholds=None, stack=False):
    assert unit and desc, f"panel {title!r}: every panel has a unit and a description"
    p = {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "id": lay.id(),
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "targets": refs(queries),
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if stack else 0,
                           "stacking": {"mode": "normal" if stack else "none"}},
            },
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }
    if thresholds:
        p["fieldConfig"]["defaults"]["thresholds"] = thresholds
        p["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] = {"mode": "line"}
    return p


def steps(*pairs):
    s = [{"color": "green", "value": None}]
    for value, color in pairs:
        s.append({"color": color, "value": value})
    return {"mode": "absolute", "steps": s}


def stat(lay, title, queries, unit=None, w=6, h=4, desc="", thresholds=None, instant=True):
    assert unit and desc, f"panel {title!r}: every panel has a unit and a description"
    p = {
        "type": "stat",
        "title": title,
        "description": desc,
        "id": lay.id(),
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "targets": refs(queries, instant=instant),
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": thresholds or steps()}, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "none", "textMode": "auto"},
    }
    return p


def gauge(lay, title, queries, unit="percentunit", w=6, h=6, desc="", thresholds=None, mx=1):
    p = stat(lay, title, queries, unit, w, h, desc, thresholds)
    p["type"] = "gauge"
    p["fieldConfig"]["defaults"]["min"] = 0
    p["fieldConfig"]["defaults"]["max"] = mx
    p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "showThresholdMarkers": True}
    return p


def table(lay, title, queries, w=24, h=8, desc="", sort_by=None, rename=None, exclude=(), units=None):
    """Instant queries in table format, merged into one row per label set. Cells are plain
    numbers (unit none) unless `units` gives a column its unit."""
    assert desc, f"panel {title!r}: every panel has a description"
    excl = {"Time": True, "__name__": True, "job": True}
    for e in exclude:
        excl[e] = True
    p = {
        "type": "table",
        "title": title,
        "description": desc,
        "id": lay.id(),
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "targets": refs(queries, instant=True, fmt="table"),
        "transformations": [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": excl, "renameByName": rename or {}}},
        ],
        "fieldConfig": {"defaults": {"unit": "none", "custom": {"align": "auto"}}, "overrides": []},
        "options": {"showHeader": True, "cellHeight": "sm"},
    }
    for field, unit in (units or {}).items():
        p["fieldConfig"]["overrides"].append(
            {"matcher": {"id": "byName", "options": field}, "properties": [{"id": "unit", "value": unit}]})
    if sort_by:
        p["options"]["sortBy"] = [{"displayName": sort_by, "desc": True}]
    return p


def heatmap(lay, title, expr, w=12, h=8, desc=""):
    assert desc, f"panel {title!r}: every panel has a description"
    return {
        "type": "heatmap",
        "title": title,
        "description": desc,
        "id": lay.id(),
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "targets": [dict(target("A", expr, "{{le}}"), format="heatmap")],
        "options": {"calculate": False, "yAxis": {"unit": "s"}, "cellGap": 1,
                    "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5},
                    "filterValues": {"le": 1e-9}, "rowsFrame": {"layout": "auto"}},
        "fieldConfig": {"defaults": {"unit": "s"}, "overrides": []},
    }


def xychart(lay, title, x_expr, y_expr, y_unit, w=12, h=8, desc=""):
    """Sweep curve: one point per sweep step, IOPS on x against latency on y."""
    assert desc, f"panel {title!r}: every panel has a description"
    return {
        "type": "xychart",
        "title": title,
        "description": desc,
        "id": lay.id(),
        "gridPos": lay.place(w, h),
        "datasource": DS,
        "targets": refs([x_expr, y_expr], instant=True, fmt="table"),
        "transformations": [{"id": "merge", "options": {}},
                            {"id": "organize", "options": {"renameByName": {"Value #A": "IOPS", "Value #B": "latency"}}}],
        "fieldConfig": {"defaults": {"unit": "iops", "custom": {"show": "points+lines", "pointSize": {"fixed": 6}}},
                        "overrides": [{"matcher": {"id": "byName", "options": "latency"},
                                       "properties": [{"id": "unit", "value": y_unit}]}]},
        "options": {"dims": {"x": "IOPS"}, "seriesMapping": "auto", "legend": {"showLegend": True}},
    }


def variables(with_device=True, with_target=True):
    def q(name, label, query, multi=True, all_value=".*"):
        v = {
            "name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "definition": query,
            "refresh": 2, "includeAll": True, "multi": multi, "allValue": all_value,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1,
        }
        if all_value is None:
            del v["allValue"]  # "All" is the listed values, so it follows the device choice
        return v
    v = [{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
          "current": {}, "hide": 0, "refresh": 1}]
    v.append(q("instance", "Host", "label_values(nvsoak_build_info, instance)"))
    if with_device:
        # NVMe controllers and SATA disks alike.
        v.append(q("device", "Device",
                   'label_values({__name__=~"nvme_info|ata_info", instance=~"$instance"}, device)'))
    if with_target:
        # The targets on the chosen drives (file targets have device="", matched by "All").
        tq = ('label_values(nvsoak_target_info{instance=~"$instance", device=~"$device"}, target)' if with_device
              else 'label_values(nvsoak_target_up{instance=~"$instance"}, target)')
        v.append(q("target", "Target", tq, all_value=None if with_device else ".*"))
    return v


def dashboard(uid, title, panels, tags, desc, with_device=True, with_target=True):
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": tags,
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables(with_device, with_target)},
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": [{"title": "nvsoak dashboards", "type": "dashboards", "tags": ["nvsoak"], "asDropdown": True}],
        "panels": panels,
    }


def zero_base(by):
    """`or` fallback so an error panel shows 0 rather than no data for error-free targets."""
    return f" or on ({by}) max by ({by}) (nvsoak_target_up{{{W}}}) * 0"


# The verdict's words and colours, for the verdict and gate-state columns and the headline stat.
VERDICT_WORDS = [("running", "RUNNING", "blue"), ("pass", "PASS", "green"),
                 ("incomplete", "INCOMPLETE", "orange"), ("fail", "FAIL", "red")]
GATE_WORDS = [("pass", "pass", "green"), ("fail", "fail", "red"),
              ("not_evaluated", "not evaluated", "orange"), ("not_applicable", "not applicable", "text")]


def text_mappings(words):
    """Value mappings from a label value (a table cell) to its word and colour."""
    return [{"type": "value", "options": {v: {"text": t, "color": c, "index": i}
                                          for i, (v, t, c) in enumerate(words)}}]


def coloured_column(p, field, words):
    """A table column shown as the word for its label value, on its colour."""
    p["fieldConfig"]["overrides"].append({"matcher": {"id": "byName", "options": field}, "properties": [
        {"id": "mappings", "value": text_mappings(words)},
        {"id": "custom.cellOptions", "value": {"type": "color-background", "mode": "basic"}}]})
    return p


def verdict_code(sel):
    """One number per target for the verdict state set (1 running, 2 pass, 3 incomplete, 4 fail:
    worse is higher), mapped back to the word in the panel. No verdict series, no value (a gap)."""
    parts = [f'nvsoak_qualification_verdict{{{sel}, verdict="{v}"}} * {i + 1}' for i, (v, _, _) in enumerate(VERDICT_WORDS)]
    return "max by (instance, target) (" + " or ".join(parts) + ")"


def verdict_code_mappings():
    m = {str(i + 1): {"text": t, "color": c, "index": i} for i, (_, t, c) in enumerate(VERDICT_WORDS)}
    m["0"] = {"text": "no verdict", "color": "text", "index": len(VERDICT_WORDS)}
    return [{"type": "value", "options": m}]


def verdict_rows(lay, P):
    """The device dashboard's top row: each target's verdict, its drive, and every gate."""
    P.append(row(lay, "Qualification verdict"))
    s = stat(lay, "Verdict", [(verdict_code(W), "{{target}}")], unit="none", w=6, h=7,
             desc="PASS only when the plan ran to its end and every gate that applies was evaluated and passed; "
                  "FAIL once a gate failed (final); INCOMPLETE when the plan stopped before its end or a gate that "
                  "applies could not be evaluated; RUNNING while the plan runs. From nvsoak_qualification_verdict; "
                  "no value when the target exports no verdict.")
    s["fieldConfig"]["defaults"]["mappings"] = verdict_code_mappings()
    s["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": [{"color": "text", "value": None}]}
    s["options"]["colorMode"] = "background"
    s["options"]["textMode"] = "value_and_name"
    P.append(s)
    t = table(lay, "Verdict and drive", [
        f"max by (instance, target, host, serial, model, firmware, verdict) (nvsoak_qualification_verdict{{{W}}}) == 1",
        f"max by (instance, target) (nvsoak_qualification_finished{{{W}}})",
        f"max by (instance, target) (nvsoak_qualification_evaluated_timestamp_seconds{{{W}}}) * 1000",
    ], w=18, h=7, rename={"Value #B": "plan finished", "Value #C": "evaluated"}, exclude=("Value #A",),
        units={"evaluated": "dateTimeFromNow"},
        desc="Each target's verdict with the drive it judged (host, serial, model, firmware; empty for a file "
             "target), whether its plan ran to its end (nvsoak_qualification_finished) and when its gates were "
             "last evaluated.")
    P.append(coloured_column(t, "verdict", VERDICT_WORDS))
    g = table(lay, "Gates", [
        f"max by (instance, target, gate, state) (nvsoak_qualification_gate_state{{{W}}}) == 1",
        f"max by (instance, target, gate) (nvsoak_qualification_gate_value{{{W}}})",
        f"max by (instance, target, gate) (nvsoak_qualification_gate_limit{{{W}}})",
    ], w=24, h=10, rename={"Value #B": "figure", "Value #C": "limit"}, exclude=("Value #A",),
        desc="Every gate of each target (gates turned off are not listed): pass, fail, not evaluated (it applies "
             "but had no data: the verdict is INCOMPLETE) or not applicable (a drive gate on a file target), with "
             "its figure and limit where the gate has numbers (nvsoak_qualification_gate_value, _limit; an empty "
             "cell when it has none). The report gives both in words.")
    P.append(coloured_column(g, "state", GATE_WORDS))


def model_firmware(expr):
    """Names file targets' empty model as such, so they make a yield row of their own."""
    return f'label_replace({expr}, "model", "(file targets)", "model", "")'


def yield_rows(lay, P, I):
    """The fleet dashboard's top row: the yield, per model and firmware, and the failing drives."""
    P.append(row(lay, "Qualification yield"))
    V = "nvsoak_qualification_verdict"
    for v, title, colour in [("pass", "Passed", "green"), ("fail", "Failed", "red"),
                             ("incomplete", "Incomplete", "orange"), ("running", "Running", "blue")]:
        s = stat(lay, title, [f'sum({V}{{{I}, verdict="{v}"}})'], unit="none", w=4,
                 desc=f"Targets whose verdict is {v.upper()} (the sum of nvsoak_qualification_verdict{{verdict=\"{v}\"}}): "
                      "0 when targets have a verdict and none is in this state, no value when none exports a verdict.")
        s["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": [{"color": colour, "value": None}]}
        P.append(s)
    judged = " + ".join(f'sum({V}{{{I}, verdict="{v}"}})' for v in ("pass", "fail", "incomplete"))
    P.append(stat(lay, "Yield (passed of judged)", [f'sum({V}{{{I}, verdict="pass"}}) / (({judged}) > 0)'],
                  unit="percentunit", w=8, thresholds={"mode": "absolute", "steps": [
                      {"color": "red", "value": None}, {"color": "orange", "value": 0.9}, {"color": "green", "value": 0.98}]},
                  desc="Targets that PASSed out of those with a final verdict (PASS, FAIL or INCOMPLETE; running ones "
                       "left out). No value until one has a final verdict."))
    by = "model, firmware"

    def per_model(v):
        return f"sum by ({by}) (" + model_firmware(V + "{" + I + ', verdict="' + v + '"}') + ")"
    judged_per_model = " + ".join(per_model(v) for v in ("pass", "fail", "incomplete"))
    P.append(table(lay, "Yield per model and firmware", [
        per_model("pass"), per_model("fail"), per_model("incomplete"), per_model("running"),
        f"{per_model('pass')} / ({judged_per_model} > 0)",
    ], w=10, h=9, sort_by="failed",
        rename={"Value #A": "passed", "Value #B": "failed", "Value #C": "incomplete", "Value #D": "running",
                "Value #E": "yield"}, units={"yield": "percentunit"},
        desc="Targets per drive model and firmware by verdict (file targets as one row), and the yield: passed of "
             "those with a final verdict (empty while all still run)."))
    fail = f'nvsoak_qualification_gate_state{{{I}, state="fail"}} == 1'
    P.append(table(lay, "Failing drives (one row per failed gate)", [
        f"max by (instance, host, serial, model, firmware, target, gate) (({fail})"
        f" * on (instance, target) group_left (host, serial, model, firmware)"
        f' max by (instance, target, host, serial, model, firmware) ({V}{{{I}, verdict="fail"}} == 1))',
        f"max by (instance, target, gate) (nvsoak_qualification_gate_value{{{I}}} and on (instance, target, gate) {fail})",
        f"max by (instance, target, gate) (nvsoak_qualification_gate_limit{{{I}}} and on (instance, target, gate) {fail})",
    ], w=14, h=9, sort_by="host", rename={"Value #B": "figure", "Value #C": "limit"}, exclude=("Value #A",),
        desc="Every target whose verdict is FAIL, with the host, the drive's serial, model and firmware, and each "
             "failed gate with its figure and limit (nvsoak_qualification_gate_state{state=\"fail\"} joined to "
             "nvsoak_qualification_verdict)."))


def device_detail():
    lay = Layout()
    P = []
    verdict_rows(lay, P)
    P.append(row(lay, "Workload"))
    P.append(timeseries(lay, "IOPS per job", [
        (f"sum by (instance, target, workload) (rate(nvsoak_read_ops_total{{{W}}}[$__rate_interval]))", "{{target}} {{workload}} read"),
        (f"sum by (instance, target, workload) (rate(nvsoak_write_ops_total{{{W}}}[$__rate_interval]))", "{{target}} {{workload}} write"),
    ], unit="iops", desc="Completed I/Os per second, from nvsoak_{read,write}_ops_total."))
    P.append(timeseries(lay, "Bandwidth per job", [
        (f"sum by (instance, target, workload) (rate(nvsoak_read_bytes_total{{{W}}}[$__rate_interval]))", "{{target}} {{workload}} read"),
        (f"sum by (instance, target, workload) (rate(nvsoak_write_bytes_total{{{W}}}[$__rate_interval]))", "{{target}} {{workload}} write"),
    ], unit="Bps", desc="Bytes read and written per second, from nvsoak_{read,write}_bytes_total."))
    P.append(timeseries(lay, "Latency quantiles (per stats interval, HDR)", [
        (f"nvsoak_read_latency_quantile_seconds{{{W}}}", "{{target}} {{workload}} read p{{quantile}}"),
        (f"nvsoak_write_latency_quantile_seconds{{{W}}}", "{{target}} {{workload}} write p{{quantile}}"),
    ], unit="s", desc="p50, p99, p99.9 and p99.99 of each stats interval, computed by nvsoak from HDR histograms."))
    P.append(timeseries(lay, "p99 latency (from the histogram)", [
        (f"histogram_quantile(0.99, sum by (instance, target, le) (rate(nvsoak_read_latency_seconds_bucket{{{W}}}[$__rate_interval])))", "{{target}} read p99"),
        (f"histogram_quantile(0.99, sum by (instance, target, le) (rate(nvsoak_write_latency_seconds_bucket{{{W}}}[$__rate_interval])))", "{{target}} write p99"),
        (f"sum by (instance, target) (rate(nvsoak_read_latency_seconds_sum{{{W}}}[$__rate_interval])) / sum by (instance, target) (rate(nvsoak_read_latency_seconds_count{{{W}}}[$__rate_interval]))", "{{target}} read mean"),
    ], unit="s", desc="p99 read and write latency estimated by Prometheus from the latency histograms' buckets, and the mean read latency."))
    P.append(heatmap(lay, "Read latency heatmap",
                     f"sum by (le) (rate(nvsoak_read_latency_seconds_bucket{{{W}}}[$__rate_interval]))",
                     desc="Reads completed per second in each latency bucket of nvsoak_read_latency_seconds."))
    P.append(heatmap(lay, "Write latency heatmap",
                     f"sum by (le) (rate(nvsoak_write_latency_seconds_bucket{{{W}}}[$__rate_interval]))",
                     desc="Writes completed per second in each latency bucket of nvsoak_write_latency_seconds."))
    P.append(timeseries(lay, "Interval IOPS (gauges)", [
        (f"nvsoak_read_iops{{{W}}}", "{{target}} {{workload}} read IOPS"),
        (f"nvsoak_write_iops{{{W}}}", "{{target}} {{workload}} write IOPS"),
    ], unit="iops", w=12, desc="The last stats interval's IOPS as nvsoak measured it (steady-state detection uses these)."))
    P.append(timeseries(lay, "Interval bandwidth (gauges)", [
        (f"nvsoak_read_bandwidth_bytes_per_second{{{W}}}", "{{target}} {{workload}} read"),
        (f"nvsoak_write_bandwidth_bytes_per_second{{{W}}}", "{{target}} {{workload}} write"),
    ], unit="Bps", w=12, desc="The last stats interval's read and write bandwidth as nvsoak measured it."))
    P.append(timeseries(lay, "Worker CPU per worker (1 = saturated)", [
        (f"sum by (instance, target, workload, mode) (rate(nvsoak_workload_cpu_seconds_total{{{W}}}[$__rate_interval])) / on (instance, target, workload) group_left max by (instance, target, workload) (nvsoak_workload_workers{{{W}}})", "{{target}} {{workload}} {{mode}}"),
    ], unit="percentunit", w=12, stack=True,
        thresholds=steps((0.9, "orange")),
        desc="CPU time of the I/O worker threads per worker, split into nvsoak's own code (user) and the kernel's work on its behalf (system). Near 1 on an interrupt-driven engine the host, not the drive, sets the pace (alert NvsoakHostLimited); polled engines spin by design. Gaps: no workload running."))
    P.append(timeseries(lay, "Worker CPU per I/O", [
        (f"nvsoak_workload_cpu_per_io_seconds{{{W}}}", "{{target}} {{workload}} {{mode}}"),
    ], unit="s", w=12, stack=True,
        desc="Worker CPU time per completed I/O over the last stats interval: user is nvsoak's own cost, system the kernel's block and io_uring path. Compare with fio in scripts/bench-vs-fio."))

    P.append(row(lay, "Phase and steady state"))
    P.append(table(lay, "Phase", [
        f"max by (instance, target, phase, profile) (nvsoak_phase_info{{{W}}})",
        f"max by (instance, target) (nvsoak_phase_running{{{W}}})",
        f"max by (instance, target) (nvsoak_target_up{{{W}}})",
        f"max by (instance, target, engine) (nvsoak_engine_info{{{W}}})",
    ], w=12, h=6, rename={"Value #B": "running", "Value #C": "up"}, exclude=("Value #A", "Value #D"),
        desc="Each target's current phase and profile, its I/O engine, whether a phase is running (1) and whether the target is up (1)."))
    P.append(table(lay, "Steady state", [
        f"max by (instance, target, workload) (nvsoak_steady_state_reached{{{W}}})",
        f"max by (instance, target, workload) (nvsoak_steady_state_rounds{{{W}}})",
        f"max by (instance, target, workload) (nvsoak_steady_state_window_average_iops{{{W}}})",
        f"max by (instance, target, workload) (nvsoak_steady_state_range_ratio{{{W}}})",
        f"max by (instance, target, workload) (nvsoak_steady_state_slope_excursion_ratio{{{W}}})",
    ], w=12, h=6, rename={"Value #A": "reached", "Value #B": "rounds", "Value #C": "window avg IOPS",
                           "Value #D": "range / avg (≤ 0.2)", "Value #E": "slope excursion / avg (≤ 0.1)"},
        units={"window avg IOPS": "iops", "range / avg (≤ 0.2)": "percentunit",
               "slope excursion / avg (≤ 0.1)": "percentunit"},
        desc="SNIA PTS steady-state detection per workload: reached (1), rounds measured, the window's average IOPS, "
             "its range and slope excursion as shares of the average."))
    P.append(timeseries(lay, "Steady-state window", [
        (f"nvsoak_steady_state_range_ratio{{{W}}}", "{{target}} {{workload}} range/avg"),
        (f"nvsoak_steady_state_slope_excursion_ratio{{{W}}}", "{{target}} {{workload}} slope excursion/avg"),
    ], unit="percentunit", thresholds=steps((0.1, "orange"), (0.2, "red")),
        desc="SNIA PTS steady state: range within 20% and slope excursion within 10% of the window average."))
    P.append(timeseries(lay, "Steady-state window average IOPS", [
        (f"nvsoak_steady_state_window_average_iops{{{W}}}", "{{target}} {{workload}}"),
        (f"nvsoak_steady_state_window_average_iops{{{W}}} and on (instance, target, workload) (nvsoak_steady_state_reached{{{W}}} == 1)", "{{target}} {{workload}} (reached)"),
    ], unit="iops", desc="The steady-state window's average IOPS; the (reached) line is drawn once steady state is reached."))

    P.append(row(lay, "Sweep"))
    P.append(xychart(lay, "Sweep: IOPS against average latency",
                     f"max by (instance, target, workload, point) (nvsoak_sweep_point_iops{{{W}}})",
                     f"max by (instance, target, workload, point) (nvsoak_sweep_point_latency_average_seconds{{{W}}})", "s",
                     desc="One point per sweep step: the IOPS it reached against its average latency."))
    P.append(xychart(lay, "Sweep: IOPS against p99 latency",
                     f"max by (instance, target, workload, point) (nvsoak_sweep_point_iops{{{W}}})",
                     f"max by (instance, target, workload, point) (nvsoak_sweep_point_latency_p99_seconds{{{W}}})", "s",
                     desc="One point per sweep step: the IOPS it reached against its p99 latency."))
    P.append(table(lay, "Sweep points", [
        f"max by (instance, target, workload, point) (nvsoak_sweep_point_target_iops{{{W}}})",
        f"max by (instance, target, workload, point) (nvsoak_sweep_point_iops{{{W}}})",
        f"max by (instance, target, workload, point) (nvsoak_sweep_point_latency_average_seconds{{{W}}})",
        f"max by (instance, target, workload, point) (nvsoak_sweep_point_latency_p99_seconds{{{W}}})",
    ], w=16, h=8, rename={"Value #A": "target IOPS", "Value #B": "IOPS", "Value #C": "avg latency", "Value #D": "p99 latency"},
        units={"target IOPS": "iops", "IOPS": "iops", "avg latency": "s", "p99 latency": "s"},
        desc="Each sweep step: the IOPS it requested, the IOPS it reached, and its average and p99 latency."))
    P.append(stat(lay, "Sweep maximum IOPS", [(f"nvsoak_sweep_max_iops{{{W}}}", "{{target}} {{workload}}")],
                  unit="iops", w=8, h=8, desc="The highest IOPS any sweep step reached (nvsoak_sweep_max_iops)."))

    P.append(row(lay, "Errors and soak totals"))
    P.append(timeseries(lay, "I/O errors", [
        (f"sum by (instance, target, op, errno) (increase(nvsoak_io_errors_total{{{W}}}[$__rate_interval]))" + zero_base("instance, target"),
         "{{target}} {{op}} {{errno}}"),
    ], unit="none", desc="Failed I/Os per op and errno (0 when none)."))
    P.append(timeseries(lay, "Verify errors", [
        (f"sum by (instance, target, kind) (nvsoak_verify_errors_total{{{W}}})" + zero_base("instance, target"),
         "{{target}} {{kind}}"),
    ], unit="none", desc="Blocks that failed verification: wrong_offset, stale_generation, bad_checksum, unreadable."))
    P.append(stat(lay, "Soak written", [(f"nvsoak_soak_written_bytes{{{W}}}", "{{target}}")], unit="bytes",
                  desc="Bytes the soak phase has written to each target (nvsoak_soak_written_bytes)."))
    P.append(stat(lay, "Soak read", [(f"nvsoak_soak_read_bytes{{{W}}}", "{{target}}")], unit="bytes",
                  desc="Bytes the soak phase has read from each target (nvsoak_soak_read_bytes)."))
    P.append(stat(lay, "Soak elapsed", [(f"nvsoak_soak_elapsed_seconds{{{W}}}", "{{target}}")], unit="s",
                  desc="Time the soak phase has run on each target (nvsoak_soak_elapsed_seconds)."))
    P.append(stat(lay, "Soak errors", [(f"nvsoak_soak_errors{{{W}}}", "{{target}}")], unit="none",
                  thresholds=steps((1, "red")), desc="I/O errors of the soak phases only (not the precondition or sweeps), summed over restarts."))

    P.append(row(lay, "Drive identity and temperature"))
    P.append(table(lay, "Drive", [
        f"max by (instance, device, model, serial, firmware) (nvme_info{{{D}}})",
        f"max by (instance, device) (nvme_total_capacity_bytes{{{D}}})",
        f"max by (instance, device) (nvme_up{{{D}}})",
    ], h=5, rename={"Value #B": "capacity", "Value #C": "up"}, exclude=("Value #A",), units={"capacity": "bytes"},
        desc="Each NVMe controller's model, serial and firmware, its total capacity and whether its health poll answers (up)."))
    P.append(timeseries(lay, "Temperature against WCTEMP and CCTEMP", [
        (f"nvme_temperature_celsius{{{D}}}", "{{device}} composite"),
        (f"nvme_temperature_sensor_celsius{{{D}}}", "{{device}} sensor {{sensor}}"),
        (f"nvme_warning_temperature_threshold_celsius{{{D}}}", "{{device}} WCTEMP"),
        (f"nvme_critical_temperature_threshold_celsius{{{D}}}", "{{device}} CCTEMP"),
    ], unit="celsius", desc="The composite temperature and every sensor against the drive's warning (WCTEMP) and critical (CCTEMP) thresholds."))
    P.append(timeseries(lay, "Thermal throttling", [
        (f"nvsoak_thermal_throttling{{{D}}}", "{{device}} throttling"),
    ], unit="none", w=8,
        desc="1 while the drive throttles (thermal management time increasing or composite ≥ WCTEMP), else 0."))
    P.append(timeseries(lay, "Thermal management time fraction", [
        (f"sum by (instance, device, level) (rate(nvme_thermal_management_seconds_total{{{D}}}[$__rate_interval]))", "{{device}} TMT{{level}}"),
    ], unit="percentunit", w=8, desc="The share of time the drive spent in each thermal management level (TMT1, TMT2)."))
    P.append(timeseries(lay, "Throttle events and TMT transitions", [
        (f"increase(nvsoak_thermal_throttle_events_total{{{D}}}[$__rate_interval])", "{{device}} throttle events"),
        (f"sum by (instance, device, level) (increase(nvme_thermal_transitions_total{{{D}}}[$__rate_interval]))", "{{device}} TMT{{level}} transitions"),
    ], unit="none", w=8, desc="Throttling episodes nvsoak counted and the drive's own thermal management transitions, per interval."))
    P.append(timeseries(lay, "IOPS while throttled and not", [
        (f"nvsoak_throttled_iops{{{D}}}", "{{device}} throttled"),
        (f"nvsoak_unthrottled_iops{{{D}}}", "{{device}} unthrottled"),
    ], unit="iops", desc="Mean workload IOPS on the drive over health polls that found it throttling, against those that did not."))
    P.append(timeseries(lay, "Time above WCTEMP and CCTEMP", [
        (f"increase(nvme_warning_temperature_seconds_total{{{D}}}[$__rate_interval])", "{{device}} above WCTEMP"),
        (f"increase(nvme_critical_temperature_seconds_total{{{D}}}[$__rate_interval])", "{{device}} above CCTEMP"),
    ], unit="s", desc="Time per interval the composite temperature spent at or above WCTEMP and CCTEMP (SMART counters)."))

    P.append(row(lay, "Wear and endurance"))
    P.append(gauge(lay, "Percentage used", [(f"nvme_percentage_used_ratio{{{D}}}", "{{device}}")],
                   thresholds=steps((0.8, "orange"), (0.9, "red")),
                   desc="The drive's own estimate of its life used (SMART Percentage Used; may exceed 100%)."))
    P.append(gauge(lay, "Endurance consumed (of rated TBW)", [(f"nvsoak_endurance_consumed_ratio{{{D}}}", "{{device}}")],
                   thresholds=steps((0.8, "orange"), (0.9, "red")),
                   desc="Lifetime bytes written over the drive's rated endurance (TBW) from the ratings table."))
    P.append(stat(lay, "Projected wear-out", [(f"nvsoak_projected_wearout_seconds{{{D}}}", "{{device}} ({{basis}})")],
                  unit="s", h=6, thresholds={"mode": "absolute", "steps": [
                      {"color": "red", "value": None}, {"color": "orange", "value": 365 * 86400},
                      {"color": "green", "value": 1825 * 86400}]},
                  desc="Time until wear-out: basis tbw at the last 24 h write rate against rated TBW, basis percentage_used at the slope of percentage used."))
    P.append(timeseries(lay, "Available spare", [
        (f"nvme_available_spare_ratio{{{D}}}", "{{device}} spare"),
        (f"nvme_available_spare_threshold_ratio{{{D}}}", "{{device}} threshold"),
    ], unit="percentunit", w=6, h=6, desc="Spare capacity left against the threshold below which the drive warns."))
    P.append(timeseries(lay, "Bytes written against rated TBW", [
        (f"nvme_data_written_bytes_total{{{D}}}", "{{device}} written (SMART)"),
        (f"nvsoak_rated_endurance_bytes{{{D}}}", "{{device}} rated TBW"),
    ], unit="bytes", desc="Lifetime bytes written (SMART Data Units Written) against the rated endurance."))
    P.append(timeseries(lay, "Observed against rated DWPD", [
        (f"nvsoak_observed_dwpd{{{D}}}", "{{device}} observed ({{window}})"),
        (f"nvsoak_rated_dwpd{{{D}}}", "{{device}} rated"),
    ], unit="suffix: DWPD", desc="Drive writes per day observed over each window against the rated DWPD."))
    P.append(timeseries(lay, "Host I/O (SMART)", [
        (f"rate(nvme_data_written_bytes_total{{{D}}}[$__rate_interval])", "{{device}} written"),
        (f"rate(nvme_data_read_bytes_total{{{D}}}[$__rate_interval])", "{{device}} read"),
    ], unit="Bps", w=8, desc="Bytes per second the drive counted written and read (SMART Data Units), from all hosts' I/O."))
    P.append(timeseries(lay, "Host commands (SMART)", [
        (f"rate(nvme_host_write_commands_total{{{D}}}[$__rate_interval])", "{{device}} write commands"),
        (f"rate(nvme_host_read_commands_total{{{D}}}[$__rate_interval])", "{{device}} read commands"),
    ], unit="iops", w=8, desc="Write and read commands per second the drive counted (SMART Host Commands)."))
    P.append(timeseries(lay, "Controller busy", [
        (f"rate(nvme_controller_busy_seconds_total{{{D}}}[$__rate_interval])", "{{device}}"),
    ], unit="percentunit", w=8, desc="The share of time the controller had I/O outstanding (SMART Controller Busy Time)."))

    P.append(row(lay, "Errors and accounting"))
    P.append(timeseries(lay, "Media errors and error log entries", [
        (f"increase(nvme_media_errors_total{{{D}}}[$__rate_interval])", "{{device}} media errors"),
        (f"increase(nvme_error_log_entries_total{{{D}}}[$__rate_interval])", "{{device}} error log entries"),
        (f"increase(nvme_unsafe_shutdowns_total{{{D}}}[$__rate_interval])", "{{device}} unsafe shutdowns"),
    ], unit="none", w=8, desc="Media and data integrity errors, error log entries and unsafe shutdowns counted per interval (SMART)."))
    P.append(table(lay, "Error log status codes (newest entries)", [
        f"sum by (instance, device, status) (nvme_error_log_status_total{{{D}}})",
    ], w=8, h=8, rename={"Value": "entries"},
        desc="Error Information log entries seen since nvsoak started, counted once each, per status code (SCT << 8 | SC)."))
    P.append(stat(lay, "Power", [
        (f"nvme_power_on_seconds_total{{{D}}}", "{{device}} power-on"),
    ], unit="s", w=4, h=8, desc="The drive's power-on time (SMART Power On Hours)."))
    P.append(stat(lay, "Power cycles", [
        (f"nvme_power_cycles_total{{{D}}}", "{{device}}"),
    ], unit="none", w=4, h=8, desc="The drive's power cycles in its life (SMART Power Cycles)."))
    P.append(timeseries(lay, "SMART against host accounting", [
        (f"nvsoak_accounting_host_written_bytes{{{D}}}", "{{device}} host wrote (nvsoak)"),
        (f"nvsoak_accounting_drive_written_bytes{{{D}}}", "{{device}} drive counted (SMART)"),
    ], unit="bytes", desc="Bytes nvsoak wrote to the drive against what its SMART Data Units Written counted over the same period."))
    P.append(timeseries(lay, "Accounting ratio and write amplification", [
        (f"nvsoak_accounting_ratio{{{D}}}", "{{device}} SMART / host"),
        (f"nvsoak_write_amplification_ratio{{{D}}}", "{{device}} write amplification (OCP)"),
    ], unit="none", thresholds=steps((1.05, "orange"), (1.2, "red")), desc="1.0 means the drive counted what was written; write amplification needs the OCP C0h log."))

    sata_rows(lay, P)
    pcie_rows(lay, P)

    P.append(row(lay, "OCP C0h and health polling"))
    P.append(timeseries(lay, "Physical media (OCP)", [
        (f"rate(nvme_ocp_physical_media_written_bytes_total{{{D}}}[$__rate_interval])", "{{device}} NAND written"),
        (f"rate(nvme_ocp_physical_media_read_bytes_total{{{D}}}[$__rate_interval])", "{{device}} NAND read"),
    ], unit="Bps", w=8, desc="Bytes per second written to and read from the NAND itself (OCP C0h), write amplification included."))
    P.append(timeseries(lay, "Bad NAND blocks (OCP)", [
        (f"nvme_ocp_bad_user_nand_blocks{{{D}}}", "{{device}} bad user NAND blocks"),
        (f"nvme_ocp_bad_system_nand_blocks{{{D}}}", "{{device}} bad system NAND blocks"),
    ], unit="none", w=8, desc="Bad user and system NAND blocks the drive reports (OCP C0h)."))
    P.append(timeseries(lay, "Recoveries and uncorrectable errors (OCP)", [
        (f"increase(nvme_ocp_xor_recovery_total{{{D}}}[$__rate_interval])", "{{device}} XOR recoveries"),
        (f"increase(nvme_ocp_uncorrectable_read_errors_total{{{D}}}[$__rate_interval])", "{{device}} uncorrectable reads"),
        (f"increase(nvme_ocp_pcie_correctable_errors_total{{{D}}}[$__rate_interval])", "{{device}} PCIe correctable"),
    ], unit="none", w=8, desc="XOR recoveries, uncorrectable reads and PCIe correctable errors counted per interval (OCP C0h)."))
    P.append(timeseries(lay, "OCP throttling status", [
        (f"nvme_ocp_thermal_throttling_status{{{D}}}", "{{device}} throttling status"),
    ], unit="none", w=8, desc="The drive's thermal throttling status (OCP C0h): 0 none, 1 first level, 2 second level, 3 shutdown."))
    P.append(timeseries(lay, "OCP throttling events", [
        (f"increase(nvme_ocp_thermal_throttling_events_total{{{D}}}[$__rate_interval])", "{{device}} throttling events"),
    ], unit="none", w=8, desc="Thermal throttling events the drive counted per interval (OCP C0h)."))
    P.append(timeseries(lay, "OCP endurance estimate", [
        (f"nvme_ocp_endurance_estimate_bytes{{{D}}}", "{{device}} endurance estimate"),
    ], unit="decbytes", w=8, desc="The drive's own estimate of the bytes it can be written in its life (OCP C0h)."))
    P.append(timeseries(lay, "Health poll", [
        (f"time() - nvsoak_health_poll_timestamp_seconds{{{D}}}", "{{device}} age of last poll"),
        (f"nvsoak_health_poll_duration_seconds{{{D}}}", "{{device}} poll duration"),
    ], unit="s", desc="How long ago each drive was last polled, and how long the poll took."))
    P.append(timeseries(lay, "Health poll errors", [
        (f"sum by (instance, device, log) (increase(nvsoak_health_poll_errors_total{{{D}}}[$__rate_interval]))", "{{device}} {{log}}"),
    ], unit="none", desc="Failed reads per log page and interval; the other pages' figures stay current."))
    P.append(timeseries(lay, "Daemon", [
        ('nvsoak_uptime_seconds{instance=~"$instance"}', "{{instance}} uptime"),
    ], unit="s", w=12, h=6, desc="Time since each nvsoak daemon started; a drop is a restart."))
    P.append(table(lay, "Build", ['max by (instance, version, revision) (nvsoak_build_info{instance=~"$instance"})'],
                   w=12, h=6, exclude=("Value",), desc="The nvsoak version and source revision each host runs."))
    return dashboard("nvsoak-device", "nvsoak / Device detail", P, ["nvsoak"],
                     "One drive and its soak targets: workload, latency, steady state, sweep, temperature, wear, errors.")


def sata_rows(lay, P):
    """The device dashboard's SATA (ATA) section: what ata_* families say."""
    P.append(row(lay, "SATA (ATA) drives"))
    P.append(table(lay, "SATA identity and SMART status", [
        f"max by (instance, device, model, serial, firmware, wwn) (ata_info{{{D}}})",
        f"max by (instance, device) (ata_smart_status_passed{{{D}}})",
        f"max by (instance, device) (ata_up{{{D}}})",
        f"max by (instance, device) (ata_percentage_used_ratio{{{D}}})",
        f"max by (instance, device, source) (nvsoak_drive_lifetime_written_bytes_total{{{D}}})",
    ], w=24, h=5, rename={"Value #B": "SMART passed", "Value #C": "up", "Value #D": "percentage used",
                          "Value #E": "lifetime written"},
        exclude=("Value #A",), units={"percentage used": "percentunit", "lifetime written": "bytes"},
        desc="ata_info, SMART RETURN STATUS, and where the lifetime-writes figure comes from "
             "(Device Statistics, else vendor attribute 241)."))
    P.append(table(lay, "SMART attributes", [
        f"max by (instance, device, id, name) (ata_smart_attribute_value{{{D}}})",
        f"max by (instance, device, id, name) (ata_smart_attribute_worst{{{D}}})",
        f"max by (instance, device, id, name) (ata_smart_attribute_threshold{{{D}}})",
        f"max by (instance, device, id, name) (ata_smart_attribute_raw{{{D}}})",
    ], w=24, h=10, rename={"Value #A": "value", "Value #B": "worst", "Value #C": "threshold", "Value #D": "raw"},
        desc="The SMART attribute table as smartctl -A shows it; a value at or below a nonzero threshold is failing."))
    P.append(timeseries(lay, "SATA temperature", [
        (f"ata_temperature_celsius{{{D}}}", "{{device}} {{kind}}"),
    ], unit="celsius", w=8, desc="Current (Device Statistics, else attribute 194/190), lifetime highest and lowest, specified maximum."))
    P.append(timeseries(lay, "SATA host I/O (Device Statistics)", [
        (f"rate(ata_written_bytes_total{{{D}}}[$__rate_interval])", "{{device}} written"),
        (f"rate(ata_read_bytes_total{{{D}}}[$__rate_interval])", "{{device}} read"),
        (f"rate(nvsoak_drive_lifetime_written_bytes_total{{{D}}}[$__rate_interval])", "{{device}} written ({{source}})"),
    ], unit="Bps", w=8, desc="Bytes per second the SATA drive counted written and read (Device Statistics, else attribute 241)."))
    P.append(timeseries(lay, "SATA errors", [
        (f"increase(ata_reported_uncorrectable_errors_total{{{D}}}[$__rate_interval])", "{{device}} reported uncorrectable"),
        (f"increase(ata_interface_crc_errors_total{{{D}}}[$__rate_interval])", "{{device}} interface CRC"),
    ], unit="none", w=8, desc="Reported uncorrectable errors and interface CRC errors counted per interval."))
    P.append(timeseries(lay, "SATA error attributes (raw)", [
        (f'ata_smart_attribute_raw{{{D}, id=~"5|187|196|198|199"}}', "{{device}} {{id}} {{name}}"),
    ], unit="none", w=8,
        desc="Raw values of the error attributes: 5 reallocated, 187 reported uncorrectable, 196 reallocation "
             "events, 198 offline uncorrectable, 199 UDMA CRC errors."))


def on_path(expr, sel, by="instance, device, address", extra=""):
    """A per-address PCIe series joined to the devices whose path holds that address."""
    return (f"max by ({by}) ({expr} * on (instance, address) group_right {extra} "
            f"nvme_pcie_path_info{{{sel}}})")


def pcie_rows(lay, P):
    """The device dashboard's PCIe section (issue 16): each controller's path, link state, AER."""
    P.append(row(lay, "PCIe path, link and AER"))
    P.append(table(lay, "PCIe path and link state", [
        f"max by (instance, device, hop, role, address) (nvme_pcie_path_info{{{D}}})",
        on_path("nvme_pcie_link_speed_transfers_per_second", D),
        on_path("nvme_pcie_link_max_speed_transfers_per_second", D),
        on_path("nvme_pcie_link_width_lanes", D),
        on_path("nvme_pcie_link_max_width_lanes", D),
        on_path("nvme_pcie_link_degraded", D),
        on_path("sum by (instance, address) (nvme_pcie_aer_errors_total)", D),
    ], w=24, h=8, sort_by="hop",
        rename={"Value #B": "speed", "Value #C": "max speed", "Value #D": "width", "Value #E": "max width",
                "Value #F": "degraded", "Value #G": "AER errors"},
        exclude=("Value #A",),
        desc="Every PCI function from the root port (hop 0) to the controller (endpoint): current and maximum "
             "link speed (transfers/s) and width (lanes), the degraded flag of the link above an endpoint or a "
             "switch upstream port (below what both ends support), and AER errors since boot."))
    P.append(timeseries(lay, "PCIe links degraded on the path", [
        (on_path("nvme_pcie_link_degraded", D), "{{device}} {{address}}"),
    ], unit="none", w=8, desc="1 while the link above that function runs below what both of its ends support."))
    P.append(timeseries(lay, "PCIe AER errors on the path", [
        (on_path("sum by (instance, address, severity) (increase(nvme_pcie_aer_errors_total[$__rate_interval]))", D,
                 by="instance, device, address, severity", extra="(severity)"), "{{device}} {{address}} {{severity}}"),
    ], unit="none", w=8, desc="AER errors counted per interval on each function of the drive's path, by severity."))
    P.append(timeseries(lay, "Drive bytes written (subsystem, counted once)", [
        ("max by (instance, drive) (nvsoak_drive_written_bytes_total"
         f" * on (instance, drive) group_left () max by (instance, drive) (label_replace(nvme_info{{{D}}}, \"drive\", \"$1\", \"subsystem\", \"(.+)\")))",
         "{{drive}}"),
    ], unit="bytes", w=8, desc="A dual-port drive's lifetime bytes written, counted once for both controllers."))


def fleet():
    lay = Layout()
    P = []
    I = 'instance=~"$instance"'
    yield_rows(lay, P, I)
    P.append(row(lay, "Drives and targets"))
    # Drives, not controllers: a dual-port drive's two controllers share its serial.
    P.append(stat(lay, "Drives", [f"count(count by (instance, serial) (nvme_info{{{I}}})) or vector(0)"], unit="none", w=4,
                  desc="NVMe drives on the chosen hosts, counted by (instance, serial): a dual-port drive's two controllers are one drive."))
    P.append(stat(lay, "Targets", [f"count(nvsoak_target_up{{{I}}})"], unit="none", w=4,
                  desc="Soak targets (devices and files) the chosen hosts run."))
    P.append(stat(lay, "Drives with a critical warning", [
        f"count(count by (instance, serial) ((nvme_critical_warning{{{I}}} > 0)"
        f" * on (instance, device) group_left (serial) nvme_info{{{I}}})) or vector(0)"], unit="none",
                  desc="NVMe drives with any critical warning bit set, each drive counted once.",
                  w=4, thresholds=steps((1, "red"))))
    P.append(stat(lay, "Targets with verify errors", [f"count(nvsoak:verify_errors:total{{{I}}} > 0) or vector(0)"],
                  unit="none", desc="Targets where a read-back found a block that failed verification.",
                  w=4, thresholds=steps((1, "red"))))
    P.append(stat(lay, "Fleet IOPS", [f"sum(nvsoak:iops:rate1m{{{I}}})"], unit="iops", w=4,
                  desc="Read and write I/Os per second completed by every target on the chosen hosts (1 min rate)."))
    P.append(stat(lay, "Fleet bandwidth", [f"sum(nvsoak:bandwidth_bytes:rate1m{{{I}}})"], unit="Bps", w=4,
                  desc="Bytes read and written per second by every target on the chosen hosts (1 min rate)."))
    P.append(stat(lay, "Fleet SMART write rate (1h)", [f"sum(nvme:drive_data_written_bytes:rate1h{{{I}}})"],
                  unit="Bps", w=4,
                  desc="Bytes per second the NVMe drives counted written (SMART, 1 h rate), each dual-port drive once "
                       "(nvme:drive_data_written_bytes:rate1h)."))
    P.append(stat(lay, "SATA drives", [f"count(ata_info{{{I}}}) or vector(0)"], unit="none", w=4,
                  desc="SATA drives on the chosen hosts."))
    P.append(stat(lay, "SATA drives failing SMART", [f"count(ata_smart_status_passed{{{I}}} == 0) or vector(0)"],
                  unit="none", desc="SATA drives whose SMART RETURN STATUS says FAILED.",
                  w=4, thresholds=steps((1, "red"))))

    P.append(table(lay, "Drives and their soak targets, worst first", [
        f"nvme:fleet_badness:score{{{I}}}",
        f"max by (instance, device, model, serial, firmware) (nvme_info{{{I}}})",
        f"max by (instance, device, phase) (nvsoak_phase_info{{{I}}} * on (instance, target) group_left (device) nvme:target:info)",
        f"nvme:targets:count{{{I}}}",
        f"nvme:target_up:min{{{I}}}",
        f"nvme:steady_state_reached:min{{{I}}}",
        f"nvme:iops:rate1m{{{I}}}",
        f"nvme:read_latency_seconds:p99_1m{{{I}}}",
        f"nvme:write_latency_seconds:p99_1m{{{I}}}",
        f"nvme:verify_errors:total{{{I}}}",
        f"nvme:io_errors:increase1h{{{I}}}",
        f"max by (instance, device) (nvme_percentage_used_ratio{{{I}}})",
        f"max by (instance, device) (nvsoak_endurance_consumed_ratio{{{I}}})",
        f"nvme:temperature_max:celsius{{{I}}}",
        f"max by (instance, device) (nvsoak_thermal_throttling{{{I}}})",
        f"nvme:media_errors:increase1h{{{I}}}",
        f"nvme:error_log_entries:increase1h{{{I}}}",
        f"max by (instance, device) (nvme_critical_warning{{{I}}})",
        f"max by (instance, device) (nvme_up{{{I}}})",
    ], h=10, sort_by="badness",
        desc="One row per drive across all hosts, with the soak targets on its namespaces joined through "
             "nvsoak_target_info (nvme:target:info), sorted by nvme:fleet_badness:score: the drive's score "
             "(down, critical warning, spare, media errors, throttling, error log, wear) plus its worst target's "
             "(down, verify errors, stalled, I/O errors). Target columns are the worst (or sum) over the drive's targets.",
        rename={"Value #A": "badness", "Value #D": "targets", "Value #E": "targets up", "Value #F": "steady state",
                "Value #G": "IOPS", "Value #H": "read p99", "Value #I": "write p99", "Value #J": "verify errors",
                "Value #K": "I/O errors 1h", "Value #L": "percentage used", "Value #M": "TBW consumed",
                "Value #N": "hottest °C", "Value #O": "throttling", "Value #P": "media errors 1h",
                "Value #Q": "error log 1h", "Value #R": "critical warning", "Value #S": "up"},
        exclude=("Value #B", "Value #C"),
        units={"percentage used": "percentunit", "TBW consumed": "percentunit", "hottest °C": "celsius",
               "read p99": "s", "write p99": "s", "IOPS": "iops"}))
    P.append(table(lay, "SATA drives, worst first", [
        f"max by (instance, device) (1 - ata_smart_status_passed{{{I}}}) + max by (instance, device) (1 - ata_up{{{I}}})",
        f"max by (instance, device, model, serial, firmware) (ata_info{{{I}}})",
        f"max by (instance, device) (ata_smart_status_passed{{{I}}})",
        f"max by (instance, device) (ata_percentage_used_ratio{{{I}}})",
        f"max by (instance, device) (nvsoak_endurance_consumed_ratio{{{I}}} and on (instance, device) ata_info)",
        f'max by (instance, device) (ata_temperature_celsius{{{I}, kind="current"}})',
        f"max by (instance, device) (ata_up{{{I}}})",
    ], h=8, sort_by="badness",
        desc="One row per SATA disk: SMART failed and down first (badness = failed + down).",
        rename={"Value #A": "badness", "Value #C": "SMART passed", "Value #D": "percentage used",
                "Value #E": "TBW consumed", "Value #F": "°C", "Value #G": "up"},
        exclude=("Value #B",), units={"percentage used": "percentunit", "TBW consumed": "percentunit", "°C": "celsius"}))
    # Targets not on an NVMe namespace (files, other block devices) have no drive row.
    F = 'and on (instance, target) nvsoak_target_info{device=""}'
    P.append(table(lay, "File targets (no NVMe controller), worst first", [
        f"nvsoak:target_badness:score{{{I}}} {F}",
        f"max by (instance, target, phase, profile) (nvsoak_phase_info{{{I}}}) {F}",
        f"max by (instance, target, path) (nvsoak_target_info{{{I}}}) {F}",
        f"max by (instance, target) (nvsoak_steady_state_reached{{{I}}}) {F}",
        f"nvsoak:iops:rate1m{{{I}}} {F}",
        f"nvsoak:read_latency_seconds:p99_1m{{{I}}} {F}",
        f"nvsoak:write_latency_seconds:p99_1m{{{I}}} {F}",
        f"nvsoak:io_errors:increase1h{{{I}}} {F}",
        f"nvsoak:verify_errors:total{{{I}}} {F}",
        f"nvsoak:stalled{{{I}}} {F}",
        f"max by (instance, target) (nvsoak_target_up{{{I}}}) {F}",
    ], h=8, sort_by="badness",
        desc="Soak targets that are not on an NVMe namespace (nvsoak_target_info device=\"\"), sorted by "
             "nvsoak:target_badness:score (down, verify errors, stalled, I/O errors).",
        rename={"Value #A": "badness", "Value #D": "steady state", "Value #E": "IOPS", "Value #F": "read p99",
                "Value #G": "write p99", "Value #H": "I/O errors 1h", "Value #I": "verify errors",
                "Value #J": "stalled", "Value #K": "up"},
        exclude=("Value #B", "Value #C"), units={"read p99": "s", "write p99": "s", "IOPS": "iops"}))
    P.append(stat(lay, "Degraded PCIe links", [f"count(nvme_pcie_link_degraded{{{I}}} == 1) or vector(0)"],
                  unit="none", desc="PCIe links running below what both of their ends support.",
                  w=4, thresholds=steps((1, "orange"))))
    P.append(stat(lay, "Uncorrectable PCIe errors", [
        f'sum(nvme_pcie_aer_errors_total{{{I}, severity=~"nonfatal|fatal"}}) or vector(0)'],
        unit="none", w=4, thresholds=steps((1, "red")),
        desc="Non-fatal and fatal AER errors since boot on every PCI function of the drives' paths."))
    P.append(stat(lay, "Cards", [f"count(nvsoak_card_info{{{I}}}) or vector(0)"], unit="none", w=4,
                  desc="Cards (controllers behind one switch or slot) nvsoak found on the chosen hosts."))
    P.append(table(lay, "Cards (controllers behind one switch or slot)", [
        f"max by (instance, card, upstream_port, slot, drives, series) (nvsoak_card_info{{{I}}})",
        f"max by (instance, card) (nvsoak_card_written_bytes_total{{{I}}})",
        f"max by (instance, card) (nvsoak_card_endurance_consumed_ratio{{{I}}})",
        f'max by (instance, card) (label_replace(nvme_pcie_link_degraded{{{I}}}, "card", "$1", "address", "(.+)"))',
        f'max by (instance, card) (label_replace(sum by (instance, address) (nvme_pcie_aer_errors_total{{{I}}}), "card", "$1", "address", "(.+)"))',
    ], w=12, h=8,
        rename={"Value #B": "written", "Value #C": "TBW consumed", "Value #D": "upstream link degraded",
                "Value #E": "upstream AER errors"},
        exclude=("Value #A",), units={"written": "bytes", "TBW consumed": "percentunit"},
        desc="One row per card: its switch upstream port, slot, drive count and rating ([[health.card]]), the "
             "bytes its drives wrote (each once) against the card's rated TBW, and the card's upstream link."))
    P.append(table(lay, "PCIe link state and AER per drive", [
        f"max by (instance, device, pci_address, slot, subsystem, card) (nvme_info{{{I}}})",
        on_path("nvme_pcie_link_degraded", I, by="instance, device"),
        on_path("sum by (instance, address) (nvme_pcie_aer_errors_total{severity=\"correctable\"})", I, by="instance, device"),
        on_path("sum by (instance, address) (nvme_pcie_aer_errors_total{severity!=\"correctable\"})", I, by="instance, device"),
    ], w=12, h=8,
        rename={"Value #B": "link degraded", "Value #C": "correctable AER", "Value #D": "uncorrectable AER"},
        exclude=("Value #A",),
        desc="Each controller's PCI address, slot, subsystem and card, the worst link on its path, and AER "
             "errors on every function of its path (a card's upstream port counts for each of its drives)."))
    P.append(timeseries(lay, "IOPS per host", [(f"sum by (instance) (nvsoak:iops:rate1m{{{I}}})", "{{instance}}")],
                        unit="iops", w=8, desc="Read and write I/Os per second of all targets on each host (1 min rate)."))
    P.append(timeseries(lay, "Hottest temperature per drive", [(f"nvme:temperature_max:celsius{{{I}}}", "{{instance}} {{device}}")],
                        unit="celsius", w=8, desc="Each drive's hottest reading: the composite temperature or any sensor."))
    P.append(timeseries(lay, "SMART write rate per drive", [(f"nvme:drive_data_written_bytes:rate1h{{{I}}}", "{{instance}} {{serial}}")],
                        unit="Bps", w=8, desc="Bytes per second each drive counted written (SMART, 1 h rate), a dual-port drive once."))
    P.append(timeseries(lay, "p99 latency per target", [
        (f"nvsoak:read_latency_seconds:p99_1m{{{I}}}", "{{instance}} {{target}} read"),
        (f"nvsoak:write_latency_seconds:p99_1m{{{I}}}", "{{instance}} {{target}} write"),
    ], unit="s", desc="p99 read and write latency of every target (1 min, from the histograms)."))
    P.append(timeseries(lay, "Temperature headroom to WCTEMP", [
        (f"nvme:temperature_headroom:celsius{{{I}}}", "{{instance}} {{device}}"),
    ], unit="celsius", desc="Degrees between each drive's composite temperature and its warning threshold (WCTEMP)."))
    P.append(timeseries(lay, "Time above CCTEMP (1 h)", [
        (f"nvme:critical_temperature_seconds:increase1h{{{I}}}", "{{instance}} {{device}}"),
    ], unit="s", desc="Time each drive spent at or above its critical temperature (CCTEMP) in the last hour."))
    return dashboard("nvsoak-fleet", "nvsoak / Fleet overview", P, ["nvsoak"],
                     "Every drive (with the soak targets on it) and every file target across the rack(s), worst first.", with_device=False, with_target=False)


# ---------------------------------------------------------------------------------------------
# promtool unit test of the verdict panels (dashboards/tests/nvsoak-verdict-panels.test.yml): the
# panels' own queries, evaluated over a small fleet of verdict series, must give these rows. The
# live check (tests/it/ops.rs) runs the same queries against a real nvsoak; this one covers drives
# with serials, every verdict, and the joins of the failing-drives table.

FLEET = [
    # instance, target, host, serial, model, firmware, verdict, finished, {gate: (state, value, limit)}
    ("rack1-host1:9757", "disk0", "rack1-host1", "S0", "M1", "F1", "fail", 1,
     {"critical_warning": ("fail", 4, 0), "io_errors": ("pass", 0, 0), "temperature": ("fail", 80, 74.85)}),
    ("rack1-host1:9757", "disk1", "rack1-host1", "S1", "M1", "F1", "pass", 1,
     {"io_errors": ("pass", 0, 0), "temperature": ("pass", 61, 74.85)}),
    ("rack1-host1:9757", "disk2", "rack1-host1", "S2", "M1", "F2", "incomplete", 0,
     {"io_errors": ("pass", 0, 0), "self_test": ("not_evaluated", None, None)}),
    ("rack1-host2:9757", "disk3", "rack1-host2", "S3", "M2", "F1", "running", 0,
     {"io_errors": ("pass", 0, 0)}),
    ("rack1-host2:9757", "t0", "rack1-host2", "", "", "", "pass", 1,
     {"io_errors": ("pass", 0, 0), "temperature": ("not_applicable", None, None)}),
]
EVALUATED_AT = 1700000000


def labels(d):
    """A series selector; empty labels left out, as Prometheus stores them."""
    return "{" + ", ".join(f'{k}="{v}"' for k, v in d.items() if v != "") + "}"


def fleet_series():
    out = []
    for inst, t, host, serial, model, fw, verdict, finished, gates in FLEET:
        base = {"instance": inst, "job": "nvsoak", "target": t}
        ident = dict(base, host=host, serial=serial, model=model, firmware=fw)
        for v, _, _ in VERDICT_WORDS:
            out.append((f"nvsoak_qualification_verdict{labels(dict(ident, verdict=v))}", int(v == verdict)))
        out.append((f"nvsoak_qualification_finished{labels(base)}", finished))
        out.append((f"nvsoak_qualification_evaluated_timestamp_seconds{labels(base)}", EVALUATED_AT))
        for gate, (state, value, limit) in gates.items():
            for st, _, _ in GATE_WORDS:
                out.append((f"nvsoak_qualification_gate_state{labels(dict(base, gate=gate, state=st))}", int(st == state)))
            if value is not None:
                out.append((f"nvsoak_qualification_gate_value{labels(dict(base, gate=gate))}", value))
                out.append((f"nvsoak_qualification_gate_limit{labels(dict(base, gate=gate))}", limit))
    return out


def expected_rows():
    """(panel title, refId) -> [(labels, value)] over FLEET."""
    code = {v: i + 1 for i, (v, _, _) in enumerate(VERDICT_WORDS)}
    e = {}
    it = lambda inst, t: {"instance": inst, "target": t}
    e[("Verdict", "A")] = [(it(r[0], r[1]), code[r[6]]) for r in FLEET]
    e[("Verdict and drive", "A")] = [(dict(it(r[0], r[1]), host=r[2], serial=r[3], model=r[4], firmware=r[5],
                                           verdict=r[6]), 1) for r in FLEET]
    e[("Verdict and drive", "B")] = [(it(r[0], r[1]), r[7]) for r in FLEET]
    e[("Verdict and drive", "C")] = [(it(r[0], r[1]), EVALUATED_AT * 1000) for r in FLEET]
    e[("Gates", "A")] = [(dict(it(r[0], r[1]), gate=g, state=st), 1) for r in FLEET for g, (st, _, _) in r[8].items()]
    e[("Gates", "B")] = [(dict(it(r[0], r[1]), gate=g), v) for r in FLEET for g, (_, v, _) in r[8].items() if v is not None]
    e[("Gates", "C")] = [(dict(it(r[0], r[1]), gate=g), l) for r in FLEET for g, (_, v, l) in r[8].items() if v is not None]
    count = {v: sum(r[6] == v for r in FLEET) for v, _, _ in VERDICT_WORDS}
    for v, title in [("pass", "Passed"), ("fail", "Failed"), ("incomplete", "Incomplete"), ("running", "Running")]:
        e[(title, "A")] = [({}, count[v])]
    e[("Yield (passed of judged)", "A")] = [({}, count["pass"] / (count["pass"] + count["fail"] + count["incomplete"]))]
    groups = sorted({(r[4] or "(file targets)", r[5]) for r in FLEET})
    per = lambda m, f, v: sum(1 for r in FLEET if (r[4] or "(file targets)", r[5]) == (m, f) and r[6] == v)
    for ref, v in zip("ABCD", ("pass", "fail", "incomplete", "running")):
        e[("Yield per model and firmware", ref)] = [({"model": m, "firmware": f}, per(m, f, v)) for m, f in groups]
    e[("Yield per model and firmware", "E")] = [
        ({"model": m, "firmware": f}, per(m, f, "pass") / sum(per(m, f, v) for v in ("pass", "fail", "incomplete")))
        for m, f in groups if sum(per(m, f, v) for v in ("pass", "fail", "incomplete")) > 0]
    failed = [(r, g, val, lim) for r in FLEET if r[6] == "fail" for g, (st, val, lim) in r[8].items() if st == "fail"]
    title = "Failing drives (one row per failed gate)"
    e[(title, "A")] = [(dict(instance=r[0], host=r[2], serial=r[3], model=r[4], firmware=r[5], target=r[1], gate=g), 1)
                       for r, g, _, _ in failed]
    e[(title, "B")] = [(dict(it(r[0], r[1]), gate=g), val) for r, g, val, _ in failed]
    e[(title, "C")] = [(dict(it(r[0], r[1]), gate=g), lim) for r, g, _, lim in failed]
    return e


def panel_test(dashboards):
    """The promtool test file (YAML written as JSON lines, which YAML reads) for the verdict panels."""
    expect = expected_rows()
    tests = []
    seen = set()
    for d in dashboards:
        for p in d["panels"]:
            for t in p.get("targets", []):
                key = (p["title"], t["refId"])
                if key not in expect:
                    continue
                seen.add(key)
                expr = t["expr"].replace("$instance", ".*").replace("$target", ".*")
                tests.append({"expr": expr, "eval_time": "1m",
                              "exp_samples": [{"labels": labels(l), "value": v} for l, v in expect[key]]})
    missing = set(expect) - seen
    assert not missing, f"expected rows for panels that do not exist: {missing}"
    doc = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": f"{v}x2"} for s, v in fleet_series()],
        "promql_expr_test": tests}]}
    head = ("# Generated by dashboards/generate.py (do not edit): the verdict panels' queries over a small\n"
            "# fleet (FLEET in generate.py) give the rows the panels are meant to show.\n"
            "# Run: promtool test rules dashboards/tests/nvsoak-verdict-panels.test.yml\n")
    return head + json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main():
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "grafana")
    os.makedirs(out, exist_ok=True)
    boards = [("nvsoak-device.json", device_detail()), ("nvsoak-fleet.json", fleet())]
    for name, d in boards:
        with open(os.path.join(out, name), "w") as f:
            json.dump(d, f, indent=2, ensure_ascii=False)
            f.write("\n")
    # The verdict panels' promtool test: beside the dashboards' directory, in tests/.
    tests = os.path.join(os.path.dirname(os.path.abspath(out)), "tests")
    os.makedirs(tests, exist_ok=True)
    with open(os.path.join(tests, "nvsoak-verdict-panels.test.yml"), "w") as f:
        f.write(panel_test([d for _, d in boards]))


if __name__ == "__main__":
    main()
