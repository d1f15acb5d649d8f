// Shared helpers: building DOM nodes from data (text only, never HTML), formatting, and the live stream.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toISOString().slice(11, 19) + " UTC";
}

function fmtDateTime(ms) {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

function fmtMs(ms) {
  if (ms === null || ms === undefined) return "duration unknown";
  return ms < 10000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function fmtNum(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en");
}

// A state in words with a symbol; the class adds colour for those who see it.
function stateNode(text, level) {
  return el("span", { class: level, text: text });
}

function groupStateLevel(state) {
  if (state === "Stable") return "ok";
  if (state === null || state === undefined) return "bad";
  if (state === "PreparingRebalance" || state === "CompletingRebalance") return "warn";
  return "warn";
}

function conditionLevel(c) {
  const good = c.type === "Degraded" || c.type === "Progressing" ? c.status === "False" : c.status === "True";
  if (good) return "ok";
  if (c.type === "Progressing") return "warn";
  return c.type === "Degraded" || c.type === "Ready" ? "bad" : "warn";
}

function conditionList(conditions) {
  return el("ul", { class: "conds" },
    (conditions || []).map((c) => el("li", { title: `${c.reason || ""}: ${c.message || ""}` },
      stateNode(`${c.type} ${c.status === "True" ? "yes" : "no"}`, conditionLevel(c)))));
}

function coordinatorNode(coordinator) {
  if (!coordinator) return "—";
  if (!coordinator.up) return stateNode("down", "bad");
  if (coordinator.api && !coordinator.api.up) return stateNode("up, HTTP API down", "warn");
  return stateNode("up", "ok");
}

// Server-sent events: EventSource reconnects by itself (the server asks for 1 s), including across an
// operator restart; the status line says which it is doing.
function liveStream(url, onSnapshot) {
  const live = document.getElementById("live");
  const say = (state, text) => { live.dataset.state = state; live.textContent = text; };
  const source = new EventSource(url);
  source.addEventListener("open", () => say("live", "Live"));
  source.addEventListener("snapshot", (event) => {
    say("live", "Live");
    onSnapshot(JSON.parse(event.data));
  });
  source.addEventListener("error", () => say("down", "Reconnecting… (the operator does not answer)"));
  return source;
}

function showError(text) {
  const banner = document.getElementById("error");
  banner.hidden = !text;
  banner.textContent = text || "";
}
