"""docs/observability.md lists exactly the metrics the operator and the coordinator register: each name
as scraped, its type, and its labels where the code has series to show them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from staticfleet.broker.server import BrokerServer, BrokerSettings
from staticfleet.kube.metrics import OperatorMetrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def documented(section: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (type, labels) from the table between <!-- metrics:section --> and its end marker."""
    text = DOC.read_text()
    table = text[text.index(f"<!-- metrics:{section} -->") : text.index(f"<!-- /metrics:{section} -->")]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`staticfleet_"):
            labels = re.findall(r"`([a-z_]+)`", cells[2])
            rows[cells[0].strip("`")] = (cells[1], labels)
    return rows


def exposed(registry: CollectorRegistry) -> dict[str, tuple[str, set[str] | None]]:
    """name as scraped -> (type, label names of its series, or None when it has none yet)."""
    found: dict[str, tuple[str, set[str] | None]] = {}
    for family in registry.collect():
        name = _scraped_name(family)
        labels = {key for sample in family.samples for key in sample.labels if key != "le"}
        found[name] = (family.type, labels if family.samples else None)
    return found


def _scraped_name(family: Metric) -> str:
    return f"{family.name}_total" if family.type == "counter" else family.name


def _compare(code: dict[str, tuple[str, set[str] | None]], doc: dict[str, tuple[str, list[str]]]) -> None:
    assert sorted(doc) == sorted(code), "docs/observability.md and the code list different metrics"
    for name, (kind, labels) in code.items():
        assert doc[name][0] == kind, f"{name}: the doc says {doc[name][0]}, the code registers a {kind}"
        if labels is not None:
            assert set(doc[name][1]) == labels, f"{name}: the doc says {doc[name][1]}, series have {labels}"


def test_the_doc_lists_every_operator_metric_and_no_other() -> None:
    metrics = OperatorMetrics()
    # One fleet and one of each labelled series, so that every family shows its labels.
    status = {
        "readyReplicas": 1,
        "group": {"members": 1, "rebalances": 2},
        "lag": {"total": 3, "worstPartition": {"lag": 2}},
        "conditions": [{"type": "Ready", "status": "True", "reason": "AsExpected"}],
    }
    metrics.observe_fleet("shop", "orders", "shop.orders", 1, status)
    metrics.reconciles.labels("ok").inc()
    metrics.members_removed.labels("shop.orders").inc()
    metrics.removal_batches.labels("shop.orders", "ok").inc()
    metrics.departure_handshakes.labels("shop.orders", "sooner").inc()
    metrics.scale_operations.labels("shop.orders", "Down").inc()
    metrics.scale_duration.labels("Down").observe(1.0)
    code = exposed(metrics.registry)
    assert all(labels is not None for _, labels in code.values()), "a family without series: add one above"
    _compare(code, documented("operator"))


def test_the_doc_lists_every_coordinator_metric_and_no_other(tmp_path: Path) -> None:
    async def families() -> dict[str, tuple[str, set[str] | None]]:
        settings = BrokerSettings(data_dir=tmp_path, listen_port=0, http_host="127.0.0.1", http_port=0)
        server = BrokerServer(settings)
        await server.start()
        try:
            return exposed(server.metrics.registry)
        finally:
            await server.stop()

    _compare(asyncio.run(families()), documented("coordinator"))
