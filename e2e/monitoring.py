"""The chart's monitoring kit as the tests read it: the alert rules rendered by helm, the Grafana
dashboard's queries, promtool (built from the Go module proxy by charts/build-promtool.sh, cached), and
which metrics and labels all of those name."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.helm import CHART, REPO_ROOT, Helm, built_by, set_flags

PROMTOOL_SCRIPT = REPO_ROOT / "charts" / "build-promtool.sh"
DASHBOARD = CHART / "files" / "grafana-dashboard.json"
MONITORING_API = ("monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")

# Labels Prometheus gives every scraped series (the target's), which the code does not export.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "endpoint", "container"})
_METRIC = re.compile(r"\bstaticfleet_[a-z_]+\b")
_SELECTOR = re.compile(r"\b(staticfleet_[a-z_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_CLAUSE = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def ensure_promtool() -> Path:
    """The promtool binary, built first when missing (long, once per version); progress to stderr."""
    return built_by(PROMTOOL_SCRIPT)


def rendered(
    helm: Helm, values: dict[str, Any] | None = None, *, api: Iterable[str] = MONITORING_API
) -> list[dict[str, Any]]:
    """The chart rendered as on a cluster that serves `api` (the Prometheus Operator's, by default)."""
    flags = [f"--api-versions={version}" for version in api]
    done = helm.run(
        "template", "sf", str(CHART), "--namespace", "staticfleet", *flags, *set_flags(values or {})
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def rule_groups(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rules file (`groups:`)."""
    (rule,) = [d for d in rendered(helm, values) if d["kind"] == "PrometheusRule"]
    spec: dict[str, Any] = rule["spec"]
    return spec


def dashboard() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return found


def dashboard_queries(board: dict[str, Any]) -> list[str]:
    """Every panel's PromQL, and the variables' queries."""
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            queries.append(str(query["query"]))
    return queries


def as_promql(query: str) -> str:
    """A dashboard query with Grafana's variables replaced, so that Prometheus can parse it."""
    query = query.replace("$__rate_interval", "5m").replace("$group", ".*")
    found = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
    return f"group by ({found.group(2)}) ({found.group(1)})" if found else query


def rule_queries(groups: dict[str, Any]) -> list[str]:
    """Every alert's expression, and the queries its annotations ask Prometheus."""
    found = []
    for group in groups["groups"]:
        for rule in group["rules"]:
            found.append(str(rule["expr"]))
            for text in rule.get("annotations", {}).values():
                found += re.findall(r'printf "((?:[^"\\]|\\.)*)"', str(text))
    return [q.replace('\\"', '"').replace("%s", "x") for q in found]


@dataclass
class Reference:
    """What one query needs of the metrics it names."""

    query: str
    metrics: set[str] = field(default_factory=set)
    # Labels named in a metric's own selector.
    selected: dict[str, set[str]] = field(default_factory=dict)
    # Labels named by by/on/without/group_left...: on at least one of the query's metrics.
    grouped: set[str] = field(default_factory=set)


def references(query: str) -> Reference:
    ref = Reference(query)
    ref.metrics = set(_METRIC.findall(query))
    for metric, matchers in _SELECTOR.findall(query):
        ref.selected.setdefault(metric, set()).update(_MATCHER.findall(matchers))
    for clause in _CLAUSE.findall(query):
        ref.grouped.update(label.strip() for label in clause.split(",") if label.strip())
    return ref


def family_of(series_name: str, families: dict[str, set[str]]) -> str | None:
    """The family a series name in a query belongs to (histograms' _bucket, _sum, _count)."""
    if series_name in families:
        return series_name
    for suffix in ("_bucket", "_sum", "_count"):
        if series_name.endswith(suffix) and series_name[: -len(suffix)] in families:
            return series_name[: -len(suffix)]
    return None


def parse_exposition(text: str) -> dict[str, set[str]]:
    """Series name -> the label names its samples carry, from a /metrics page (histogram buckets under
    their family, with `le`)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


def missing(queries: Iterable[str], served: dict[str, set[str]]) -> list[str]:
    """What the queries name that the served metrics lack: each metric, each label of a metric's
    selector, and each grouping label (on some metric of the query; `le` on a bucket)."""
    problems = []
    for query in queries:
        ref = references(query)
        for metric in sorted(ref.metrics):
            if family_of(metric, served) is None:
                problems.append(f"{metric}: not served ({query})")
        for metric, labels in ref.selected.items():
            have = served.get(metric, set())
            problems += [f"{metric}: no label {label} ({query})" for label in sorted(labels - have)]
        everywhere = set().union(*(served.get(m, set()) for m in ref.metrics)) | TARGET_LABELS
        problems += [
            f"label {label}: on none of {sorted(ref.metrics)} ({query})"
            for label in sorted(ref.grouped - everywhere)
        ]
    return problems
