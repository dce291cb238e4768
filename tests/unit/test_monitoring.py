"""monitoring/: the alert rules pass promtool, and the alerts and the dashboard query only
metrics that Guardian exports (names taken from a real Metrics instance)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from tests.helpers import require_tool

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "info": ("_info",),
    "gauge": ("",),
}
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}


def promtool() -> str:
    return require_tool("promtool", "prometheus")


def exportednames() -> set[str]:
    """Every series name a Guardian /metrics page can carry, from the families it registers."""
    registry = CollectorRegistry()
    PrometheusMetrics(registry)
    names = set()
    for family in registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def metricnames(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (no full parser: enough for our queries)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        word, rest = match.group(), expr[match.end() :].lstrip()
        before = expr[: match.start()]
        if rest.startswith("(") or word in PROMQL_WORDS or before.endswith("$"):
            continue  # a function or aggregation, a keyword, or a Grafana variable
        names.add(word)
    return names


def dashboard() -> dict:
    return json.loads((MONITORING / "grafana-dashboard.json").read_text())


def dashboard_queries(dash: dict) -> list[str]:
    out = []
    for panel in dash["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            out.extend(t["expr"] for t in inner.get("targets", []))
    return out


def test_metric_names_are_found_in_promql():
    expr = 'sum by (le) (rate(guardian_x_bucket{instance=~"$host", a="b c"}[5m])) / up or vector(0)'
    assert metricnames(expr) == {"guardian_x_bucket", "up"}


def test_alert_rules_pass_promtool_check():
    result = subprocess.run(
        [promtool(), "check", "rules", str(MONITORING / "alerts.yml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_alert_rules_pass_their_promtool_unit_tests():
    result = subprocess.run(
        [promtool(), "test", "rules", "alerts.test.yml"],
        capture_output=True,
        text=True,
        cwd=MONITORING,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_rule_has_a_firing_and_a_quiet_test_case():
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    tests = yaml.safe_load((MONITORING / "alerts.test.yml").read_text())["tests"]
    cases = [case for t in tests for case in t["alert_rule_test"]]
    for rule in rules:
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']} never fires in a test"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']} never stays quiet"


def test_alert_rules_use_only_exported_metrics():
    exported = exportednames() | {"up"}  # `up` is Prometheus's own, for the scrape itself
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    for rule in rules:
        unknown = metricnames(rule["expr"]) - exported
        assert not unknown, f"{rule['alert']} queries {unknown}"


def test_dashboard_queries_name_only_exported_metrics():
    dash = dashboard()
    queries = dashboard_queries(dash)
    assert len(queries) >= 15
    exported = exportednames()
    for expr in queries:
        names = metricnames(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r} queries {names - exported}"
    for variable in dash["templating"]["list"]:
        if variable["type"] == "query":
            name = re.match(r"label_values\((\w+),", variable["definition"])
            assert name and name.group(1) in exported


def test_dashboard_filters_every_query_by_the_host_variable():
    dash = dashboard()
    host = next(v for v in dash["templating"]["list"] if v["name"] == "host")
    assert host["definition"] == "label_values(guardian_build_info, instance)"
    assert host["multi"] and host["includeAll"]
    for expr in dashboard_queries(dash):
        selectors = re.findall(r"guardian_\w+\{([^}]*)\}", expr)
        assert selectors and all('instance=~"$host"' in s for s in selectors), expr


def test_dashboard_shows_what_the_issue_asks_for():
    titles = {p["title"] for p in dashboard()["panels"]}
    for wanted in (
        "Open incidents by type and state",
        "Restarts by outcome",
        "Detection to restart request",
        "Sweep duration",
        "Notification outcomes",
    ):
        assert wanted in titles


def panel_query(title: str) -> str:
    [panel] = [p for p in dashboard()["panels"] if p.get("title") == title]
    return str(panel["targets"][0]["expr"])


def test_time_since_last_sweep_panel_shows_no_sweep_yet_instead_of_56_years(tmp_path):
    # The panel's own query, evaluated by promtool: before the first sweep (NaN, or 0 from an
    # older Guardian) it returns nothing, which the panel shows as its noValue text.
    expr = panel_query("Time since last sweep").replace('{instance=~"$host"}', "")
    cases = {
        "NaN NaN NaN NaN NaN NaN": [],
        "0x5": [],
        "60 120 180 240": [{"labels": "{}", "value": 60}],
    }
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'guardian_last_sweep_timestamp_seconds{instance="a"}', "values": v}
            ],
            "promql_expr_test": [{"expr": expr, "eval_time": "5m", "exp_samples": samples}],
        }
        for v, samples in cases.items()
    ]
    path = tmp_path / "panel.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "tests": tests}))
    result = subprocess.run(
        [promtool(), "test", "rules", str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    [panel] = [p for p in dashboard()["panels"] if p.get("title") == "Time since last sweep"]
    assert panel["fieldConfig"]["defaults"]["noValue"] == "no sweep yet"
