// One fleet: pods beside members, partitions with lag, the timeline, conditions and Events.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function card(label, value, id) {
  return el("div", { id: id }, el("dt", { text: label }), el("dd", {}, value));
}

function renderSummary(f) {
  const g = f.group || {};
  const lag = f.lag;
  const worst = !lag || !lag.worstPartition ? "—"
    : lag.worstPartition.lag === 0 ? "none behind"
    : `${lag.worstPartition.topic}-${lag.worstPartition.partition}: ${fmtNum(lag.worstPartition.lag)}`;
  document.getElementById("summary").replaceChildren(
    card("Replicas (ready)", `${f.replicas} (${f.readyReplicas} ready)`, "card-replicas"),
    card("Group state (live)", groupStateNode(g), "card-state"),
    card("Generation", g.generation ?? "— (not reported by this cluster)", "card-generation"),
    card("Rebalances", `${g.rebalances ?? "—"} total, ${g.rebalancesLastHour ?? "—"} in the last hour`, "card-rebalances"),
    card("Total lag", lag ? fmtNum(lag.total) : "—", "card-lag"),
    card("Worst partition", worst, "card-worst"),
    card("Group id", el("code", { text: f.groupId }), "card-group"),
    card("Coordinator", coordinatorText(f.coordinator, f.bootstrapServers), "card-coordinator"),
  );
}

// The state read now from the coordinator; where the resource's status (the operator's last pass, which
// the conditions below come from) says otherwise, both are shown and named.
function groupStateNode(g) {
  const node = el("span", {}, g.state ? stateNode(g.state, groupStateLevel(g.state)) : stateNode("unknown", "bad"));
  if (g.generation !== null && g.generation !== undefined) node.append(`, generation ${g.generation}`);
  const s = g.status || {};
  if (g.statusAgrees === false) {
    const recorded = `${s.state}${s.generation !== null && s.generation !== undefined ? `, generation ${s.generation}` : ""}`;
    node.append(el("br"), el("small", { class: "status-differs",
      text: `the status (the operator's last pass, which the conditions come from) says ${recorded}` }));
  }
  return node;
}

function coordinatorText(c, bootstrap) {
  const node = el("span", {}, coordinatorNode(c), " ", el("code", { text: bootstrap || "" }));
  if (c && !c.up && c.error) node.append(el("br"), el("small", { text: c.error }));
  else if (c && c.api && !c.api.up && c.api.error) node.append(el("br"), el("small", { text: c.api.error }));
  return node;
}

function renderAlerts(f) {
  const section = document.getElementById("alerts");
  const items = (f.alerts || []).map((a) => el("li", { "data-kind": a.kind, text: a.message }));
  if (f.coordinator && !f.coordinator.up) {
    items.unshift(el("li", { "data-kind": "coordinator-down",
      text: `The coordinator at ${f.bootstrapServers} does not answer: ${f.coordinator.error || ""}` }));
  }
  section.querySelector("ul").replaceChildren(...items);
  section.hidden = items.length === 0;
}

// A pod of several members (membersPerPod) spans one row per member: its cells come once, on its first row.
function renderMembers(f) {
  const rows = (f.members || []).map((m) => {
    const span = { rowspan: m.podRows > 1 ? m.podRows : null };
    const podCells = m.podRows === 0 ? [] : [
      el("td", { class: "num", text: m.ordinal ?? "—", ...span }),
      el("th", { scope: "row", class: "pod", ...span }, m.pod || stateNode("no pod", "bad")),
      el("td", { class: "phase", ...span }, m.phase
        ? stateNode(`${m.phase}${m.ready ? ", ready" : ", not ready"}`, m.ready ? "ok" : "warn")
        : "—"),
      el("td", { class: "num restarts", text: m.restarts ?? "—", ...span }),
    ];
    const missing = m.podRows === 1 || !m.expectedInstanceId
      ? stateNode("not in the group", "warn")
      : el("span", {}, el("code", { text: m.expectedInstanceId }), " ", stateNode("not in the group", "warn"));
    return el("tr", { "data-pod": m.pod || "", "data-instance": m.instanceId || m.expectedInstanceId || "" },
      ...podCells,
      el("td", { class: "instance mono" }, m.instanceId || missing),
      el("td", { class: "member mono", text: m.memberId || "—" }),
      el("td", { class: "host mono", text: m.host || "—" }),
      el("td", { class: "partitions" },
        m.partitions.length ? el("span", { class: "partitions" }, m.partitions.map((p) => el("code", { text: p }))) : "none"));
  });
  document.querySelector("#members tbody").replaceChildren(...rows);
}

function renderPartitions(f) {
  const note = document.getElementById("offsets-error");
  note.hidden = !f.offsetsError;
  note.textContent = f.offsetsError ? `Offsets unavailable: ${f.offsetsError}` : "";
  const max = Math.max(1, ...(f.partitions || []).map((p) => p.lag || 0));
  const rows = (f.partitions || []).map((p) => el("tr", { "data-partition": `${p.topic}-${p.partition}` },
    el("td", { text: p.topic }),
    el("td", { class: "num", text: p.partition }),
    el("td", { class: "mono", text: p.owner || "unassigned" }),
    el("td", { class: "num committed", text: p.committed === null ? "none committed" : fmtNum(p.committed) }),
    el("td", { class: "num logend", text: fmtNum(p.logEnd) }),
    el("td", { class: "num lag" }, p.lag === null ? "—" : fmtNum(p.lag),
      p.lag ? el("span", { class: "lagbar", style: `width:${Math.round((p.lag / max) * 4 + 0.2)}rem`, "aria-hidden": "true" }) : null)));
  document.querySelector("#partitions tbody").replaceChildren(...rows);
}

function opText(op) {
  const what = op.kind === "create" || op.kind.startsWith("scale")
    ? `${op.kind} ${op.from} → ${op.to}` : op.kind;
  const cost = [`${op.rebalances} rebalance${op.rebalances === 1 ? "" : "s"}`];
  if (op.rebalanceMs !== null && op.rebalanceMs !== undefined) cost.push(`${fmtMs(op.rebalanceMs)} rebalancing`);
  if (op.partitionsMoved !== null && op.partitionsMoved !== undefined) cost.push(`${op.partitionsMoved} partitions moved`);
  if (op.completedMs) cost.push(`done in ${((op.completedMs - op.startedMs) / 1000).toFixed(1)} s`);
  return { what, cost: cost.join(", ") };
}

function rbText(r) {
  const parts = [`generation ${r.generation ?? "?"}`, `reason: ${r.reason || "unknown"}`, fmtMs(r.durationMs)];
  parts.push(r.partitionsMoved === null || r.partitionsMoved === undefined
    ? "partitions moved: not seen" : `${r.partitionsMoved} partitions moved`);
  if (r.members !== null && r.members !== undefined) parts.push(`${r.members} members`);
  return parts.join(", ");
}

function renderTimeline(f) {
  const items = [];
  for (const op of f.operations || []) items.push({ at: op.startedMs, kind: "operation", op });
  for (const r of f.rebalances || []) items.push({ at: r.startedMs || r.completedMs, kind: "rebalance", r });
  items.sort((a, b) => a.at - b.at);
  const list = items.map((item) => {
    if (item.kind === "operation") {
      const t = opText(item.op);
      return el("li", { class: "operation", "data-kind": item.op.kind, "data-started": item.op.startedMs },
        el("time", { datetime: new Date(item.at).toISOString(), text: fmtTime(item.at) }), " ",
        el("span", { class: "kind", text: t.what }), " — ", el("span", { class: "cost", text: t.cost }));
    }
    return el("li", { class: "rebalance", "data-generation": item.r.generation ?? "", "data-reason": item.r.reason },
      el("time", { datetime: new Date(item.at).toISOString(), text: fmtTime(item.at) }), " ",
      el("span", { class: "kind", text: item.r.source === "observed" ? "rebalance (observed)" : "rebalance" }),
      " — ", el("span", { class: "detail", text: rbText(item.r) }));
  });
  if (!list.length) list.push(el("li", { text: "Nothing yet." }));
  document.getElementById("timeline").replaceChildren(...list);
  drawChart(f, items);
}

// Operations above the axis, rebalances below it (a bar as long as the rebalance), on one time scale.
function drawChart(f, items) {
  const width = 1000, height = 120, left = 90, right = 20;
  const now = Date.now();
  const start = f.timeline.startMs ?? now;
  const end = Math.max(now, f.timeline.lastMs ?? now, start + 1000);
  const x = (ms) => left + ((ms - start) / (end - start)) * (width - left - right);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `Timeline from ${fmtTime(start)} to ${fmtTime(end)}: ${(f.operations || []).length} operations, ${(f.rebalances || []).length} rebalances; listed below.` });
  chart.append(svg("text", { x: 8, y: 34, class: "lane" }, "operations"));
  chart.append(svg("text", { x: 8, y: 84, class: "lane" }, "rebalances"));
  chart.append(svg("line", { x1: left, x2: width - right, y1: 60, y2: 60, class: "axis" }));
  for (let i = 0; i <= 4; i++) {
    const ms = start + ((end - start) * i) / 4;
    chart.append(svg("line", { x1: x(ms), x2: x(ms), y1: 56, y2: 64, class: "axis" }));
    chart.append(svg("text", { x: x(ms), y: 112, class: "tick", "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, fmtTime(ms)));
  }
  for (const item of items) {
    if (item.kind === "operation") {
      const cx = x(item.at);
      const mark = svg("path", { d: `M${cx} 22 l7 9 l-7 9 l-7 -9 z`, class: "op" });
      mark.append(svg("title", {}, `${fmtTime(item.at)} ${opText(item.op).what}: ${opText(item.op).cost}`));
      chart.append(mark);
      // The label on the side with room for it: past the middle it ends at the mark instead of starting there.
      const pastMiddle = cx > (left + width - right) / 2;
      chart.append(svg("text", { x: pastMiddle ? cx - 10 : cx + 10, y: 20, class: "tick", "text-anchor": pastMiddle ? "end" : "start" },
        opText(item.op).what));
    } else {
      const s = item.r.startedMs || item.r.completedMs, e = item.r.completedMs || s;
      const bar = svg("rect", { x: x(s), y: 72, width: Math.max(3, x(e) - x(s)), height: 18, class: "rb" });
      bar.append(svg("title", {}, `${fmtTime(s)} rebalance: ${rbText(item.r)}`));
      chart.append(bar);
    }
  }
  document.getElementById("timeline-chart").replaceChildren(chart);
}

function renderConditions(f) {
  const rows = (f.conditions || []).map((c) => el("tr", { "data-type": c.type },
    el("th", { scope: "row", text: c.type }),
    el("td", {}, stateNode(c.status, conditionLevel(c))),
    el("td", { text: c.reason || "" }),
    el("td", { text: c.message || "" }),
    el("td", { text: fmtDateTime(c.lastTransitionMs) })));
  document.querySelector("#conditions tbody").replaceChildren(...rows);
}

function renderEvents(f) {
  const rows = (f.events || []).map((e) => el("tr", { "data-reason": e.reason || "" },
    el("td", { text: fmtDateTime(e.atMs) }),
    el("td", {}, stateNode(e.type || "", e.type === "Warning" ? "warn" : "ok")),
    el("td", { text: e.reason || "" }),
    el("td", { text: e.message || "" })));
  document.querySelector("#events tbody").replaceChildren(...rows);
}

function renderFleet(f) {
  document.body.dataset.generated = f.generatedMs || "";
  if (f.gone) {
    showError(`The StaticConsumerGroup ${f.namespace}/${f.name} no longer exists.`);
    return;
  }
  showError(f.error || "");
  document.getElementById("title").textContent = `${f.namespace} / ${f.name}`;
  document.title = `staticfleet: ${f.namespace}/${f.name}`;
  renderAlerts(f);
  renderSummary(f);
  renderMembers(f);
  renderPartitions(f);
  renderTimeline(f);
  renderConditions(f);
  renderEvents(f);
}

(function start() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  const fleet = `${parts[1]}/${parts[2]}`;
  liveStream(`/api/stream?fleet=${encodeURIComponent(fleet)}`, renderFleet);
})();
