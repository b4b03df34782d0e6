// Hark's status page: fetches /api/state, then follows /api/events and
// fetches again (at most every 150 ms) when something happens.
"use strict";

const $ = (id) => document.getElementById(id);

function show(id, on) { $(id).hidden = !on; }

function text(id, value) { $(id).textContent = value == null ? "" : String(value); }

function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = value == null ? "" : String(value);
  row.appendChild(td);
  return td;
}

// A table is rebuilt only when its items changed: every event refreshes
// the page, and a row replaced under the pointer loses a click that began
// on the old one (mouse down on one button, up on its copy).
const shown = new Map();

function rows(id, items, fill) {
  const key = JSON.stringify(items);
  if (shown.get(id) === key) return;
  shown.set(id, key);
  const body = $(id).querySelector("tbody");
  const fresh = items.map((item) => {
    const row = document.createElement("tr");
    fill(row, item);
    return row;
  });
  // Rows whose controls are unchanged keep their elements and take the new
  // text (a token's last use ticks on with every refresh the page makes
  // with its own): a row rebuilt under the pointer loses a click begun on it.
  const old = Array.from(body.rows);
  if (old.length === fresh.length && fresh.every((row, i) => shape(row) === shape(old[i]))) {
    fresh.forEach((row, i) => Array.from(row.cells).forEach((cell, j) => {
      const kept = old[i].cells[j];
      if (cell.children.length === 0 && kept.textContent !== cell.textContent) {
        kept.textContent = cell.textContent;
      }
    }));
    return;
  }
  body.replaceChildren(...fresh);
}

// A row's cells and the controls in them, with their state, but not the
// plain text of its cells.
function shape(row) {
  return Array.from(row.cells).map((cell) => Array.from(cell.querySelectorAll("*")).map((e) =>
    [e.outerHTML.split(">")[0], e.value, e.checked, e.children.length ? "" : e.textContent].join(" ")
  ).join(";")).join("|");
}

// Like rows(), but also rebuilt when `extra` (what the rows offer) changes.
function rowsKeyed(id, items, extra, fill) {
  const key = JSON.stringify([items, extra]);
  if (shown.get(`${id}+`) === key) return;
  shown.set(`${id}+`, key);
  shown.delete(id);
  rows(id, items, fill);
}

function input(type, value, name) {
  const field = document.createElement("input");
  field.type = type;
  field.name = name;
  if (type === "checkbox") field.checked = value; else field.value = value == null ? "" : value;
  return field;
}

function choice(options, value, name) {
  const select = document.createElement("select");
  select.name = name;
  for (const [v, label] of options) {
    const option = document.createElement("option");
    option.value = v;
    option.textContent = label;
    select.appendChild(option);
  }
  select.value = value;
  return select;
}

// One agent's settings as a row of fields, saved or reset with its buttons.
function agentRow(row, a, data) {
  row.dataset.agent = a.name;
  cell(row, a.name);
  const def = data.agents.default_voice;
  const voices = [["default", `default (${def})`]].concat(data.voices.map((v) => [v, v]));
  if (a.voice && !data.voices.includes(a.voice)) voices.push([a.voice, a.voice]);
  const voice = choice(voices, a.voice || "default", "voice");
  const rate = input("number", a.rate == null ? 1 : a.rate, "rate");
  rate.min = "0.5"; rate.max = "2"; rate.step = "0.05";
  const chime = choice([["default", "default"], ["high", "high"], ["low", "low"], ["triple", "triple"]], a.chime, "chime");
  const aliases = input("text", a.aliases.join(", "), "aliases");
  const announce = input("checkbox", a.announce, "announce");
  cell(row, "").appendChild(voice);
  cell(row, "").appendChild(rate);
  cell(row, "").appendChild(chime);
  cell(row, "").appendChild(aliases);
  cell(row, "").appendChild(announce);
  cell(row, { defaults: "defaults", config: "hark.toml", run_time: "changed here" }[a.source]);
  const save = document.createElement("button");
  save.type = "button";
  save.textContent = "Save";
  save.dataset.save = a.name;
  save.addEventListener("click", () => act("/api/agent-settings", {
    agent: a.name,
    voice: voice.value,
    rate: Number(rate.value),
    chime: chime.value,
    aliases: aliases.value.split(",").map((x) => x.trim()).filter((x) => x),
    announce: announce.checked,
  }));
  const reset = document.createElement("button");
  reset.type = "button";
  reset.textContent = "Reset";
  reset.dataset.reset = a.name;
  reset.disabled = a.source !== "run_time";
  reset.addEventListener("click", () => act("/api/agent-settings", { agent: a.name, reset: true }));
  const actions = cell(row, "");
  actions.append(save, reset);
}

function fail(message) {
  text("error", message);
  show("error", !!message);
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error((data.error && data.error.message) || response.statusText);
  }
  return data;
}

function locked(why) {
  show("unlocked", false);
  show("locked", true);
  text("locked-why", why);
  text("lights", "locked");
  if (events) { events.close(); events = null; }
}

function render(data) {
  const s = data.status;
  show("locked", false);
  show("unlocked", true);
  const lights = $("lights");
  lights.dataset.lights = data.lights;
  lights.textContent = data.lights;
  const warning = s.auth && s.auth.warning;
  text("warning", warning);
  show("warning", !!warning);
  text("now-mic", s.muted ? "muted" : s.recording ? "open (listening)" : "closed");
  text("now-speaker", s.speaking ? "speaking" : "quiet");
  const holder = s.floor && s.floor.holder;
  text("now-floor", holder ? `${holder.who} (${holder.tool})` : "free");
  text("now-queue", s.floor && s.floor.queue.length ? s.floor.queue.map((p) => p.who).join(", ") : "nobody");
  text("now-inbox", s.messages_waiting);
  show("sim-board", data.simulated_board);

  show("pairing", !!data.pairing);
  if (data.pairing) {
    text("pairing-who", `${data.pairing.agent} from ${data.pairing.address} asks to use Hark.`);
  }
  rows("clients", s.clients, (row, c) => {
    cell(row, c.name); cell(row, c.transport); cell(row, c.peer); cell(row, c.access);
    cell(row, Array.isArray(c.doing) ? c.doing.join(", ") : c.doing);
  });
  rows("tokens", data.tokens, (row, t) => {
    cell(row, t.name); cell(row, t.scopes.join(", ")); cell(row, t.created);
    cell(row, t.last_used ? `${t.last_used} from ${t.last_address || "?"}` : "never");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Revoke";
    button.dataset.revoke = t.name;
    button.addEventListener("click", () => act("/api/revoke", { name: t.name }));
    cell(row, "").appendChild(button);
  });
  const agents = data.agents ? data.agents.agents : [];
  rowsKeyed("agents", agents, data.voices, (row, a) => agentRow(row, a, data));
  rows("history", data.history, (row, h) => {
    cell(row, h.at); cell(row, h.kind); cell(row, h.agent || (h.kind === "spoken" ? "Hark" : "person"));
    cell(row, h.text);
  });
  if (document.activeElement !== $("volume") && s.volume != null) {
    $("volume").value = s.volume;
  }
  text("volume-value", s.volume == null ? "no speaker" : s.volume);
  show("later", s.scheduled.length > 0);
  rows("scheduled", s.scheduled, (row, x) => {
    cell(row, x.ringing ? "ringing now" : x.due_at);
    cell(row, x.kind);
    cell(row, x.agent || "script");
    cell(row, x.text);
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = x.ringing ? "Stop" : "Cancel";
    button.addEventListener("click", () => act("/api/cancel", { id: x.id }));
    cell(row, "").appendChild(button);
  });
  const wake = s.wake;
  show("wake", !!wake);
  if (wake) {
    text("wake-state", `${wake.state}: ${wake.words.join(", ")}`);
    $("wake-on").checked = wake.state !== "off" && wake.state !== "unavailable";
    $("wake-on").disabled = wake.state === "unavailable";
    if (document.activeElement !== $("wake-sensitivity")) $("wake-sensitivity").value = wake.sensitivity;
    rows("wake-detections", wake.detections.slice().reverse(), (row, d) => {
      cell(row, d.at); cell(row, d.word); cell(row, d.score.toFixed(3)); cell(row, d.started ? "yes" : "no");
    });
  }
  const subsystems = $("subsystems");
  subsystems.replaceChildren();
  for (const [name, state] of Object.entries(s.subsystems)) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = state;
    subsystems.append(dt, dd);
  }
  text("log", data.log.join("\n"));
  text("version", `Hark ${s.version}, up ${Math.round(s.uptime_seconds)} s`);
}

let events = null;
let pending = null;
let unreachable = false;

function refreshSoon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 150);
}

function follow() {
  if (events) return;
  events = new EventSource("/api/events");
  events.onmessage = () => refreshSoon();
  const names = ["listening_started", "listening_ended", "speaking_started", "speaking_ended",
    "speaker", "button", "mute", "floor_granted", "floor_released", "floor_queued",
    "pairing_requested", "pairing_ended", "utterance_transcribed", "inbox_arrived",
    "inbox_taken", "answer_awaited", "answer_ended", "transcription_started", "transcription_ended",
    "health", "wake_word"];
  for (const name of names) {
    events.addEventListener(name, (e) => {
      text("last-event", `${name}: ${e.data}`);
      refreshSoon();
    });
  }
  events.onerror = () => { /* EventSource reconnects by itself */ };
}

async function refresh() {
  try {
    const response = await fetch("/api/state");
    if (response.status === 401) {
      const data = await response.json().catch(() => ({}));
      locked(data.error && data.error.type === "PermissionDeniedError"
        ? "This browser's token has no admin scope, which the status page needs."
        : "This browser may not open Hark's status page yet.");
      return;
    }
    if (!response.ok) throw new Error(`the appliance answered ${response.status}`);
    render(await response.json());
    // Only the error this set goes with a good answer: an action's stays
    // until the next action.
    if (unreachable) { fail(""); unreachable = false; }
    follow();
  } catch (e) {
    fail(`Cannot reach Hark: ${e.message}`);
    unreachable = true;
  }
}

async function act(path, body) {
  try {
    await post(path, body);
    fail("");
  } catch (e) {
    fail(e.message);
  }
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("pair-browser").addEventListener("click", async () => {
    $("pair-browser").disabled = true;
    text("pair-progress", "Hark is asking. Press the button on the appliance now…");
    try {
      await post("/api/pair");
      text("pair-progress", "Allowed.");
      refresh();
    } catch (e) {
      text("pair-progress", e.message);
    }
    $("pair-browser").disabled = false;
  });
  $("add-agent-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("add-agent-ask").disabled = true;
    show("add-agent-result", false);
    text("add-agent-progress", "Hark is asking. Press the button on the appliance now…");
    try {
      const added = await post("/api/add-agent", {
        name: $("add-agent-name").value,
        scopes: $("add-agent-scopes").value,
      });
      text("add-agent-progress", added.replaced
        ? "Allowed. The earlier token of that name no longer works."
        : "Allowed.");
      text("add-agent-who", added.name);
      text("add-agent-token", added.token);
      const lines = $("add-agent-lines");
      lines.replaceChildren();
      for (const line of added.lines) {
        const block = document.createElement("section");
        block.className = "client";
        block.dataset.client = line.client;
        const title = document.createElement("h3");
        title.textContent = `${line.label}: ${line.place}`;
        const pre = document.createElement("pre");
        pre.textContent = line.text;
        block.append(title, pre);
        lines.appendChild(block);
      }
      show("add-agent-result", true);
    } catch (err) {
      text("add-agent-progress", err.message);
    }
    $("add-agent-ask").disabled = false;
  });
  $("login").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await post("/api/login", { token: $("login-token").value });
      $("login-token").value = "";
      refresh();
    } catch (err) {
      text("pair-progress", err.message);
    }
  });
  $("pairing-approve").addEventListener("click", () => act("/api/pairing", { approve: true }));
  $("pairing-refuse").addEventListener("click", () => act("/api/pairing", { approve: false }));
  $("volume").addEventListener("change", () => act("/api/volume", { volume: Number($("volume").value) }));
  $("wake-on").addEventListener("change", () => act("/api/wake", { enabled: $("wake-on").checked }));
  $("wake-sensitivity").addEventListener("change", () => act("/api/wake", { sensitivity: $("wake-sensitivity").value }));
  $("ptt").addEventListener("pointerdown", () => act("/api/button", { action: "hold" }));
  $("ptt").addEventListener("pointerup", () => act("/api/button", { action: "release" }));
  $("logout").addEventListener("click", async () => { await act("/api/logout"); });
  refresh();
});
