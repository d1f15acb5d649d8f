// The overview: one row per StaticConsumerGroup, kept up to date by the stream.
"use strict";

function overviewRow(f) {
  const g = f.group || {};
  const href = `/fleets/${encodeURIComponent(f.namespace)}/${encodeURIComponent(f.name)}`;
  const hour = g.rebalancesLastHour === null || g.rebalancesLastHour === undefined
    ? "—" : `${g.rebalancesLastHour}${g.rebalancesLastHourAtLeast ? "+" : ""}`;
  const lag = f.lag ? fmtNum(f.lag.total) : "—";
  return el("tr", { "data-fleet": `${f.namespace}/${f.name}` },
    el("th", { scope: "row" }, el("a", { href: href, text: f.name }), f.deleting ? " (deleting)" : ""),
    el("td", { text: f.namespace }),
    el("td", { class: "num replicas", text: f.replicas }),
    el("td", { class: "num ready", text: f.readyReplicas }),
    el("td", { class: "state" }, f.reading ? "reading…"
      : g.state ? stateNode(g.state, groupStateLevel(g.state)) : stateNode("unknown", "bad")),
    el("td", { class: "num generation", text: g.generation ?? "—" }),
    el("td", { class: "num rebalances", text: hour }),
    el("td", { class: "num lag", text: lag }),
    el("td", {}, conditionList(f.conditions)),
    el("td", { class: "coordinator" }, coordinatorNode(f.coordinator)));
}

function renderOverview(snapshot) {
  document.body.dataset.generated = snapshot.generatedMs || "";
  showError(snapshot.error || "");
  const body = document.querySelector("#fleets tbody");
  // Every refresh replaces the rows: a keyboard user's focus stays on the same fleet's link.
  const focused = body.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
  body.replaceChildren(...(snapshot.fleets || []).map(overviewRow));
  if (focused) {
    const again = [...body.querySelectorAll("a")].find((a) => a.getAttribute("href") === focused);
    if (again) again.focus();
  }
  document.getElementById("empty").hidden = (snapshot.fleets || []).length > 0;
}

(function start() {
  const match = location.pathname.match(/^\/namespaces\/([^/]+)/);
  const namespace = match ? decodeURIComponent(match[1]) : "";
  if (namespace) {
    document.getElementById("fleets-caption").textContent = `StaticConsumerGroups in ${namespace}`;
    document.title = `staticfleet: ${namespace}`;
  }
  liveStream(`/api/stream${namespace ? `?namespace=${encodeURIComponent(namespace)}` : ""}`, renderOverview);
})();
