"""The dashboard in a real headless Chromium, on real fleets of the local cluster with the embedded
coordinator: the overview, a fleet page, live lag, a reconnect across an operator restart, the
scale-down timeline, a coordinator that is down, 404 pages, a narrow window and the keyboard.

The tests share one namespace, one operator and one browser (module fixtures) and run in file order:
the scale-down comes last but one, as it changes the fleet.
"""

from __future__ import annotations

import secrets
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.browser import NARROW, WIDE, chromium, page_overflows, rows, texts, wait_in_page
from e2e.helpers import Cluster, wait_until
from e2e.localcluster.ports import closed_port

from .dashboard_harness import (
    Dashboard,
    all_committed_without_lag,
    card,
    delete_fleets,
    is_png,
    lag_shown,
    open_page,
    operator_with_dashboard,
    produce,
    screenshot,
)
from .harness import (
    PARTITIONS,
    Coordinator,
    consumer_template,
    fleet_manifest,
    paused,
    ready_with,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

FLEET = "orders"
OFFLINE = "offline"
REPLICAS = 3


@pytest.fixture(scope="module")
def namespace_m(cluster: Cluster, pod_runner: str | None, crd: None) -> Iterator[str]:
    name = f"dashboard-{secrets.token_hex(3)}"
    cluster.kubectl.run("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false")
        wait_until(lambda: not cluster.kubectl.items("pods", name), timeout=120, what="the pods to be gone")


@pytest.fixture(scope="module")
def topic(coordinator: Coordinator, namespace_m: str) -> str:
    name = f"{namespace_m}-orders"
    coordinator.create_topic(name, PARTITIONS)
    return name


@pytest.fixture(scope="module")
def dashboard(
    cluster: Cluster,
    namespace_m: str,
    coordinator: Coordinator,
    topic: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Dashboard]:
    """An operator with the dashboard, a fleet of three on the embedded coordinator, and a fleet whose
    coordinator is down (nothing listens at its address)."""
    kubectl = cluster.kubectl
    running = operator_with_dashboard(cluster.kubeconfig, namespace_m, tmp_path_factory.mktemp("operator"))
    try:
        # Consumers that do not read the departure mark: the timeline shows the operator's removal.
        template = consumer_template(leaves_when_departing=False)
        kubectl.apply(fleet_manifest(FLEET, REPLICAS, coordinator, topic, template=template), namespace_m)
        with closed_port() as kafka_port, closed_port() as api_port:
            offline = fleet_manifest(OFFLINE, 1, f"127.0.0.1:{kafka_port}", topic, deletionPolicy="Retain")
            offline["spec"]["kafka"]["coordinatorApi"] = f"http://127.0.0.1:{api_port}"
            kubectl.apply(offline, namespace_m)
            wait_fleet(kubectl, namespace_m, FLEET, ready_with(REPLICAS), timeout=120, what="Ready with 3")
            yield running
    finally:
        if running.runner.process is None or running.runner.process.poll() is not None:
            running.runner.start()
        try:
            delete_fleets(kubectl, namespace_m)
        finally:
            running.runner.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(WIDE) as driver:
        yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def fleet_url(dashboard: Dashboard, namespace: str, name: str = FLEET) -> str:
    return f"{dashboard.url}/fleets/{namespace}/{name}"


def group_id(namespace: str) -> str:
    return f"{namespace}.{FLEET}"


def row(driver: Any, fleet: str) -> dict[str, str]:
    """The overview's row of a fleet (empty strings until it is shown)."""
    keys = ("replicas", "ready", "state", "generation", "rebalances", "lag", "coordinator")
    found = rows(driver, f'#fleets tr[data-fleet="{fleet}"]', {k: f".{k}" for k in keys})
    return {k: (found[0][k] or "") if found else "" for k in keys}


def test_the_overview_lists_every_fleet_with_its_group_and_coordinator(
    dashboard: Dashboard, namespace_m: str, coordinator: Coordinator, browser: Any, shots: Path
) -> None:
    open_page(browser, f"{dashboard.url}/")
    orders = wait_in_page(
        browser,
        lambda d: (
            (r := row(d, f"{namespace_m}/{FLEET}"))["state"].endswith("Stable") and r["ready"] == "3" and r
        ),
        timeout=10,
        what="the fleet Stable with 3 ready",
    )
    group = coordinator.group(group_id(namespace_m))
    assert group is not None
    assert orders["replicas"] == "3"
    assert orders["generation"] == str(group["generation"])
    assert int(orders["rebalances"]) >= 1
    assert orders["coordinator"].endswith("up")

    def down(d: Any) -> dict[str, str] | None:
        found = row(d, f"{namespace_m}/{OFFLINE}")
        return found if found["coordinator"].endswith("down") else None

    offline = wait_in_page(browser, down, timeout=30, what="the offline fleet's coordinator shown as down")
    assert offline["state"].endswith("unknown")
    assert texts(browser, "#live") == ["Live"]
    assert is_png(screenshot(browser, shots, "dashboard-overview"))


def test_a_fleet_page_shows_each_pod_beside_its_member_and_partitions(
    dashboard: Dashboard, namespace_m: str, coordinator: Coordinator, browser: Any
) -> None:

    open_page(browser, fleet_url(dashboard, namespace_m))
    wait_in_page(
        browser,
        lambda d: len([t for t in texts(d, "#members tbody td.member") if t != "—"]) == REPLICAS,
        timeout=10,
        what="three pods, each with its member",
    )
    group = coordinator.group(group_id(namespace_m))
    assert group is not None
    members = {m["instanceId"]: m for m in group["memberList"]}
    shown = []
    cells = {"pod": ".pod", "instance": ".instance", "member": ".member", "phase": ".phase"}
    for tr in rows(browser, "#members tbody tr", cells):
        pod = str(tr["pod"])
        member = members[pod]
        assert (tr["instance"], tr["member"], tr["phase"]) == (pod, member["memberId"], "Running, ready")
        partitions = texts(browser, f'#members tr[data-pod="{pod}"] td.partitions code')
        expected = [f"{t}-{p}" for t, ps in sorted(member["partitions"].items()) for p in sorted(ps)]
        assert partitions == expected
        shown.extend(partitions)
    assert sorted(m for m in members) == [f"{FLEET}-{i}" for i in range(REPLICAS)]
    assert len(shown) == len(set(shown)) == PARTITIONS, "every partition has one owner"
    assert len(texts(browser, "#partitions tbody tr")) == PARTITIONS
    assert "Stable" in card(browser, "state")
    assert card(browser, "generation") == str(group["generation"])
    (ready,) = texts(browser, '#conditions tr[data-type="Ready"]')
    assert "True" in ready and "FleetReady" in ready
    assert "Scaled" in texts(browser, "#events tbody td:nth-child(3)")
    assert texts(browser, '#timeline li.operation[data-kind="create"]')


def test_the_page_reconnects_by_itself_across_an_operator_restart(
    dashboard: Dashboard, namespace_m: str, browser: Any
) -> None:
    open_page(browser, fleet_url(dashboard, namespace_m))
    browser.execute_script("window.sameDocument = 'yes'")
    dashboard.runner.stop()
    wait_in_page(
        browser,
        lambda d: "Reconnecting" in " ".join(texts(d, "#live")),
        timeout=10,
        what="Reconnecting",
    )
    restarted_ms = int(time.time() * 1000)
    dashboard.restart_operator()
    wait_in_page(
        browser,
        lambda d: (
            texts(d, "#live") == ["Live"]
            and int(d.execute_script("return document.body.dataset.generated || 0")) > restarted_ms
        ),
        timeout=10,
        what="a snapshot from the restarted operator",
    )
    assert browser.execute_script("return window.sameDocument") == "yes", "no reload"


def test_lag_rises_while_the_consumers_are_paused_and_falls_after(
    dashboard: Dashboard, namespace_m: str, coordinator: Coordinator, topic: str, browser: Any
) -> None:
    open_page(browser, fleet_url(dashboard, namespace_m))
    produce(coordinator.bootstrap, topic, 1, PARTITIONS)  # a first commit on every partition
    wait_in_page(browser, all_committed_without_lag, timeout=30, what="every partition committed, no lag")
    per_partition = 20
    with paused(group_id(namespace_m), REPLICAS):
        produce(coordinator.bootstrap, topic, per_partition, PARTITIONS)
        wait_in_page(
            browser,
            lambda d: lag_shown(d) == per_partition * PARTITIONS,
            timeout=10,
            what=f"a lag of {per_partition * PARTITIONS} while paused",
        )
        lags = texts(browser, "#partitions tbody td.lag")
        assert lags == [str(per_partition)] * PARTITIONS
        assert card(browser, "worst").endswith(f": {per_partition}")
    wait_in_page(browser, lambda d: lag_shown(d) == 0, timeout=30, what="the lag to fall back to 0")


def test_after_a_scale_down_the_timeline_shows_it_and_its_single_rebalance_within_two_seconds(
    cluster: Cluster,
    dashboard: Dashboard,
    namespace_m: str,
    coordinator: Coordinator,
    browser: Any,
    shots: Path,
) -> None:

    gid = group_id(namespace_m)
    open_page(browser, fleet_url(dashboard, namespace_m))
    browser.execute_script("window.sameDocument = 'yes'")
    before = coordinator.group(gid)
    assert before is not None
    known = {r["generation"] for r in before["recentRebalances"]}

    cluster.kubectl.run("scale", f"scg/{FLEET}", "-n", namespace_m, f"--replicas={REPLICAS - 1}")

    def new_rebalances() -> list[dict[str, Any]]:
        group = coordinator.group(gid) or {}
        return [
            r for r in group.get("recentRebalances", []) if r["generation"] not in known and r["completedMs"]
        ]

    (rebalance,) = wait_until(new_rebalances, timeout=60, what="the scale-down's rebalance", interval=0.05)
    seen = time.monotonic()
    css = f'#timeline li.rebalance[data-generation="{rebalance["generation"]}"]'
    text = wait_in_page(browser, lambda d: texts(d, css), timeout=2.0, what="the rebalance in the timeline")[
        0
    ]
    shown_after = time.monotonic() - seen
    assert f"reason: {rebalance['reason']}" in text
    assert f"{rebalance['durationMs']} ms" in text or f"{rebalance['durationMs'] / 1000:.1f} s" in text
    assert f"generation {rebalance['generation']}" in text
    # The operation is written to the status once the operator has finished it, which can be after
    # the group has already rebalanced.
    (operation,) = wait_in_page(
        browser,
        lambda d: texts(d, '#timeline li.operation[data-kind="scale down"]'),
        timeout=30,
        what="the scale-down operation in the timeline",
    )
    assert f"scale down {REPLICAS} → {REPLICAS - 1}" in operation
    assert "1 rebalance," in operation or operation.endswith("1 rebalance")
    assert browser.execute_script("return window.sameDocument") == "yes", "no reload"
    print(f"[timing] dashboard: rebalance shown {shown_after:.2f}s after the coordinator reported it")

    wait_fleet(cluster.kubectl, namespace_m, FLEET, ready_with(REPLICAS - 1), timeout=60, what="Ready with 2")
    assert new_rebalances() == [rebalance], "the scale-down cost one rebalance"
    wait_in_page(
        browser,
        lambda d: len(texts(d, "#members tbody tr")) == REPLICAS - 1,
        timeout=10,
        what="two pods left on the page",
    )
    assert is_png(screenshot(browser, shots, "dashboard-fleet"))


def test_a_fleet_whose_coordinator_is_down_is_shown_down_and_the_page_stays_up(
    dashboard: Dashboard, namespace_m: str, browser: Any
) -> None:
    assert dashboard.status(f"/fleets/{namespace_m}/{OFFLINE}") == 200
    try:
        open_page(browser, fleet_url(dashboard, namespace_m, OFFLINE))
    except TimeoutError as exc:
        why = dashboard.why_no_snapshot(f"/api/fleets/{namespace_m}/{OFFLINE}")
        raise AssertionError(f"{exc}\n{why}") from exc
    alert = wait_in_page(
        browser,
        lambda d: [t for t in texts(d, '#alerts li[data-kind="coordinator-down"]') if t],
        timeout=30,
        what="the coordinator-down alert",
    )[0]
    assert "does not answer" in alert
    assert card(browser, "coordinator").startswith("✖ down") or "down" in card(browser, "coordinator")
    assert texts(browser, "#live") == ["Live"]


def test_unknown_fleets_and_namespaces_are_404_pages(
    dashboard: Dashboard, namespace_m: str, browser: Any
) -> None:
    for path in (
        f"/fleets/{namespace_m}/nope",
        "/fleets/no-such-namespace/orders",
        "/namespaces/no-such-namespace",
    ):
        assert dashboard.status(path) == 404
        browser.get(f"{dashboard.url}{path}")
        heading = browser.find_element("id", "problem").text
        assert heading in ("Fleet not found", "Namespace not found")
        assert "Traceback" not in browser.page_source


def test_the_pages_fit_a_narrow_window_and_work_by_keyboard(
    dashboard: Dashboard, namespace_m: str, browser: Any
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    try:
        browser.set_window_size(*NARROW)
        for url in (f"{dashboard.url}/namespaces/{namespace_m}", fleet_url(dashboard, namespace_m)):
            open_page(browser, url)
            assert not page_overflows(browser), f"{url} scrolls sideways at {NARROW[0]} px"
        open_page(browser, f"{dashboard.url}/namespaces/{namespace_m}")
        target = f"/fleets/{namespace_m}/{FLEET}"
        # Keys go to whatever has the focus, as a keyboard's do: the rows are replaced at every refresh.
        for _ in range(10):
            ActionChains(browser).send_keys(Keys.TAB).perform()
            if (browser.switch_to.active_element.get_attribute("href") or "").endswith(target):
                break
        else:
            raise AssertionError("the fleet's link is not reachable by Tab")
        ActionChains(browser).send_keys(Keys.ENTER).perform()
        wait_in_page(browser, lambda d: d.current_url.endswith(target), timeout=10, what="the fleet page")
    finally:
        browser.set_window_size(*WIDE)


def test_the_dashboard_serves_only_what_it_was_asked_for(dashboard: Dashboard) -> None:
    with urllib.request.urlopen(f"{dashboard.url}/static/app.css", timeout=5) as response:
        css = response.read().decode()
    assert "http://" not in css and "https://" not in css, "no outside resources: works offline"
