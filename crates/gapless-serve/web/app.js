// gapless dashboard: compose profiles (a form and its TOML, validated by the core on the
// server), run them with live charts pushed over SSE, look back at past runs and compare
// two, and make calibrations. No framework; uPlot draws the charts.
"use strict";

const $ = (s) => document.querySelector(s);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};

// ---- the server ----------------------------------------------------------------------

const token = () => localStorage.getItem("gapless-token") || "";

async function api(method, path, body, raw) {
  const headers = {};
  if (token()) headers.Authorization = "Bearer " + token();
  let data;
  if (body !== undefined) data = raw ? body : JSON.stringify(body);
  // The server takes a state-changing request only with its body's own type (TOML for a
  // profile's or an experiment's text): a type no other page can send without a preflight.
  if (method !== "GET") headers["Content-Type"] = raw ? "application/toml" : "application/json";
  const r = await fetch(path, { method, headers, body: data });
  if (r.status === 401) {
    $("#token-box").hidden = false;
    throw new Error("this server needs its token");
  }
  const text = await r.text();
  const json = text ? JSON.parse(text) : null;
  if (!r.ok) {
    const e = new Error((json && json.error) || r.statusText);
    e.body = json;
    e.status = r.status;
    throw e;
  }
  return json;
}

function status(msg, bad) {
  const s = $("#status");
  s.textContent = msg;
  s.className = bad ? "bad" : "";
}

const withToken = (path) => (token() ? path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token()) : path);

// ---- the profile: state.profile is the source of truth; the form and TOML views show it --

const state = { name: "", profile: null, saved: null, run: null, source: null, charts: {} };

const defaultStream = (i) => ({
  name: "s" + (i + 1),
  size: 64,
  template: { l4: "udp", src_port: 1024, dst_port: 1024 },
  timing: { rate_pps: 1000, duration_s: 5 },
});

function getPath(obj, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function setPath(obj, path, value) {
  const keys = path.split(".");
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (o[k] == null || typeof o[k] !== "object") o[k] = {};
    o = o[k];
  }
  const last = keys[keys.length - 1];
  if (value === undefined || value === "") delete o[last];
  else o[last] = value;
}

// One input bound to a path inside stream `i`. `kind`: "text", "number" or a list of options.
const PLACEHOLDERS = {
  "template.eth_src": "02:67:6c:00:00:01", "template.eth_dst": "02:67:6c:00:00:02",
  "template.ip_src": "198.18.0.1", "template.ip_dst": "198.18.0.2",
  "template.src_port": "1024", "template.dst_port": "1024", "template.payload.pattern": "zeros",
};

function bound(i, path, label, kind = "text", cls = "") {
  const full = `stream.${i}.${path}`;
  const cur = getPath(state.profile, full);
  let input;
  if (Array.isArray(kind)) {
    input = el("select", {}, ...kind.map((o) => el("option", { value: o, text: o || "(default)" })));
    input.value = cur == null ? "" : String(cur);
  } else {
    input = el("input", { type: kind === "number" ? "number" : "text", step: "any", class: cls, placeholder: PLACEHOLDERS[path] || "" });
    input.value = cur == null ? "" : String(cur);
  }
  input.dataset.path = `stream[${i}].${path}`;
  input.addEventListener("change", () => {
    let v = input.value.trim();
    if (kind === "number" && v !== "") v = Number(v);
    setPath(state.profile, full, v);
    profileChanged();
  });
  return el("label", {}, label, input);
}

function sizeControls(i) {
  const s = state.profile.stream[i];
  const mode = typeof s.size === "number" || s.size == null ? "fixed" : s.size.imix ? "imix" : s.size.kind === "uniform" ? "uniform" : "custom";
  const select = el("select", { "data-path": `stream[${i}].size` },
    ...["fixed", "uniform", "imix", "custom"].map((o) => el("option", { value: o, text: o })));
  select.value = mode;
  select.addEventListener("change", () => {
    const m = select.value;
    if (m === "fixed") s.size = 64;
    else if (m === "uniform") s.size = { kind: "uniform", min: 64, max: 1518 };
    else if (m === "imix") s.size = { imix: "simple" };
    profileChanged(true);
  });
  const kids = [el("label", {}, "size", select)];
  if (mode === "fixed") kids.push(bound(i, "size", "bytes (FCS incl.)", "number", "narrow"));
  if (mode === "uniform") kids.push(bound(i, "size.min", "min", "number", "narrow"), bound(i, "size.max", "max", "number", "narrow"));
  if (mode === "imix") kids.push(bound(i, "size.imix", "IMIX", ["simple", "ipv6", "tolly"]));
  if (mode === "custom") kids.push(el("span", { class: "field-error", text: "edit this size in the TOML" }));
  return el("div", { class: "row" }, ...kids);
}

const FIELDS = ["mac_src", "mac_dst", "vlan_id", "vlan_pcp", "ip_src", "ip_dst", "tos", "dscp", "ttl", "src_port", "dst_port", "payload"];

function fieldOps(i) {
  const s = state.profile.stream[i];
  s.field = s.field || [];
  const rows = s.field.map((f, k) => {
    const parse = (v) => (v === "" ? undefined : /^\d+$/.test(v) ? Number(v) : v);
    const inp = (key, label, cls = "narrow") => {
      const x = el("input", { class: cls });
      x.value = f[key] == null ? "" : Array.isArray(f[key]) ? f[key].join(",") : String(f[key]);
      x.dataset.path = `stream[${i}].field[${k}].${key}`;
      x.addEventListener("change", () => {
        if (key === "values") f.values = x.value ? x.value.split(",").map((v) => parse(v.trim())) : undefined;
        else f[key] = parse(x.value.trim());
        if (f[key] === undefined) delete f[key];
        profileChanged();
      });
      return el("label", {}, label, x);
    };
    const sel = (key, opts) => {
      const x = el("select", {}, ...opts.map((o) => el("option", { value: o, text: o })));
      x.value = f[key] || opts[0];
      x.dataset.path = `stream[${i}].field[${k}].${key}`;
      x.addEventListener("change", () => { f[key] = x.value; profileChanged(); });
      return el("label", {}, key, x);
    };
    const del = el("button", { text: "✕", title: "remove this field op", onclick: () => { s.field.splice(k, 1); profileChanged(true); } });
    return el("div", { class: "field-op" }, sel("field", FIELDS), sel("op", ["inc", "dec", "random", "list"]),
      inp("from", "from", "wide"), inp("to", "to", "wide"), inp("step", "step"), inp("values", "values (a,b,c)", "wide"), del);
  });
  const add = el("button", { text: "Add field op", onclick: () => { s.field.push({ field: "src_port", op: "inc", from: 1024, to: 1033 }); profileChanged(true); } });
  return el("fieldset", {}, el("legend", { text: "field ops" }), ...rows, add);
}

function streamCard(i) {
  const s = state.profile.stream[i];
  const remove = el("button", { text: "Remove", onclick: () => { state.profile.stream.splice(i, 1); profileChanged(true); } });
  return el("div", { class: "stream", "data-stream": String(i) },
    el("h3", {}, el("span", { text: `Stream ${i + 1}` }), remove),
    el("div", { class: "row" }, bound(i, "name", "name")),
    el("fieldset", {}, el("legend", { text: "template" }),
      el("div", { class: "row" }, bound(i, "template.eth_src", "MAC src", "text", "wide"), bound(i, "template.eth_dst", "MAC dst", "text", "wide")),
      el("div", { class: "row" }, bound(i, "template.ip_src", "IP src", "text", "wide"), bound(i, "template.ip_dst", "IP dst", "text", "wide"),
        vlanInput(i)),
      el("div", { class: "row" }, bound(i, "template.l4", "L4", ["", "udp", "tcp", "icmp"]),
        bound(i, "template.src_port", "src port", "number", "narrow"), bound(i, "template.dst_port", "dst port", "number", "narrow"),
        bound(i, "template.payload.pattern", "payload", ["", "zeros", "incrementing", "random"]))),
    el("fieldset", {}, el("legend", { text: "size" }), sizeControls(i)),
    fieldOps(i),
    el("fieldset", {}, el("legend", { text: "timing" }),
      el("div", { class: "row" }, bound(i, "timing.rate_pps", "rate (pps)", "number", "narrow"),
        bound(i, "timing.pattern", "pattern", ["", "cbr", "poisson", "bursty", "distribution", "self_similar"]),
        bound(i, "timing.burst", "burst", "number", "narrow"),
        bound(i, "timing.count", "count", "number", "narrow"), bound(i, "timing.duration_s", "duration (s)", "number", "narrow"))),
  );
  void s;
}

// The outer VLAN tag's id (more tags: edit the TOML).
function vlanInput(i) {
  const s = state.profile.stream[i];
  const tags = (s.template && s.template.vlan) || [];
  const x = el("input", { type: "number", class: "narrow" });
  x.value = tags.length ? tags[0].id : "";
  x.dataset.path = `stream[${i}].template.vlan`;
  x.addEventListener("change", () => {
    s.template = s.template || {};
    if (x.value === "") delete s.template.vlan;
    else s.template.vlan = [Object.assign({}, tags[0] || {}, { id: Number(x.value) })].concat(tags.slice(1));
    profileChanged();
  });
  return el("label", {}, "VLAN id", x);
}

function renderForm() {
  const box = $("#streams");
  box.replaceChildren(...(state.profile.stream || []).map((_, i) => streamCard(i)));
  $("#profile-name").value = state.name;
}

// ---- sync: form -> TOML (server) -> check (server); TOML edits -> form ---------------

let syncTimer = null;
function profileChanged(rerender) {
  if (rerender) renderForm();
  clearTimeout(syncTimer);
  syncTimer = setTimeout(syncFromForm, 250);
}

async function syncFromForm() {
  try {
    const r = await api("POST", "/api/toml", { profile: state.profile });
    $("#toml").value = r.toml;
    await check(r.toml);
  } catch (e) {
    showCheck({ ok: false, error: { error: e.message } });
  }
}

async function check(text) {
  const r = await api("POST", "/api/check", text, true);
  showCheck(r);
  return r;
}

function showCheck(r) {
  document.querySelectorAll(".err").forEach((e) => e.classList.remove("err"));
  document.querySelectorAll(".field-error.from-check").forEach((e) => e.remove());
  const c = $("#check");
  if (r.ok) {
    c.className = "check ok";
    c.textContent = r.text;
    return;
  }
  c.className = "check bad";
  c.textContent = r.error.error + (r.error.fix && !r.error.error.includes(r.error.fix) ? "\nfix: " + r.error.fix : "");
  const path = r.error.path;
  if (!path) return;
  // The deepest input whose path starts the error's path gets the message beside it.
  const inputs = [...document.querySelectorAll("[data-path]")].filter((e) => path === e.dataset.path || path.startsWith(e.dataset.path + ".") || path.startsWith(e.dataset.path + "["));
  inputs.sort((a, b) => b.dataset.path.length - a.dataset.path.length);
  if (inputs[0]) {
    inputs[0].classList.add("err");
    inputs[0].closest("label").append(el("span", { class: "field-error from-check", text: r.error.problem || r.error.error }));
  }
}

async function tomlEdited() {
  const text = $("#toml").value;
  const r = await check(text);
  if (r.profile && typeof r.profile === "object") {
    state.profile = r.profile;
    state.profile.stream = state.profile.stream || [];
    renderForm();
    showCheck(r);
  }
}

// ---- profiles ------------------------------------------------------------------------

async function loadProfiles() {
  const r = await api("GET", "/api/profiles");
  const list = $("#profile-list");
  list.replaceChildren(...r.profiles.map((p) => el("li", { class: p.name === state.saved ? "current" : "", "data-name": p.name, onclick: () => openProfile(p.name) },
    el("span", { text: p.name }), p.valid ? "" : el("span", { class: "invalid", text: "draft", title: p.error || "" }))));
}

async function openProfile(name) {
  const p = await api("GET", "/api/profiles/" + encodeURIComponent(name));
  state.name = name;
  state.saved = name;
  $("#toml").value = p.toml;
  const r = await check(p.toml);
  state.profile = r.profile || { stream: [] };
  state.profile.stream = state.profile.stream || [];
  renderForm();
  showCheck(r);
  loadProfiles();
}

function newProfile() {
  state.name = "";
  state.saved = null;
  state.profile = { seed: 1, stream: [defaultStream(0)] };
  profileChanged(true);
}

async function saveProfile() {
  const name = $("#profile-name").value.trim();
  if (!name) return status("give the profile a name first", true);
  await syncFromForm();
  try {
    const row = await api("PUT", "/api/profiles/" + encodeURIComponent(name), $("#toml").value, true);
    state.name = state.saved = name;
    $("#save-state").textContent = row.valid ? "saved" : "saved as a draft: " + row.error;
    status("saved " + name);
    loadProfiles();
  } catch (e) {
    status(e.message, true);
    if (e.body) showCheck({ ok: false, error: e.body });
  }
}

async function duplicateProfile() {
  const base = state.name || "profile";
  state.name = base + "-copy";
  state.saved = null;
  $("#profile-name").value = state.name;
  await saveProfile();
}

async function deleteProfile() {
  if (!state.saved) return status("open a saved profile first", true);
  await api("DELETE", "/api/profiles/" + encodeURIComponent(state.saved));
  status("deleted " + state.saved);
  newProfile();
  loadProfiles();
}

function exportToml() {
  const blob = new Blob([$("#toml").value], { type: "text/plain" });
  const a = el("a", { href: URL.createObjectURL(blob), download: (state.name || "profile") + ".toml" });
  document.body.append(a);
  a.click();
  a.remove();
}

async function importToml(file) {
  $("#toml").value = await file.text();
  state.name = file.name.replace(/\.toml$/, "").replace(/[^A-Za-z0-9._-]/g, "-");
  state.saved = null;
  await tomlEdited();
  $("#profile-name").value = state.name;
}

// ---- runs and live charts ------------------------------------------------------------

const palette = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"];

function chart(id, title, unit, names) {
  const box = $("#" + id);
  box.replaceChildren();
  const series = [{}].concat(names.map((n, k) => ({ label: n, stroke: palette[k % palette.length], width: 1.5 })));
  const opts = {
    title, width: Math.max(320, box.clientWidth || 480), height: 170, series,
    scales: { x: { time: false } },
    axes: [{ label: "s" }, { label: unit, size: 60 }],
  };
  const data = [[]].concat(names.map(() => []));
  return { plot: new uPlot(opts, data, box), data };
}

function startCharts(names) {
  const per = (suffix) => names.flatMap((n) => suffix.map((s) => n + " " + s));
  state.charts = {
    rate: chart("chart-rate", "TX and RX rate", "frames/s", per(["tx", "rx"])),
    lateness: chart("chart-lateness", "lateness of the last departure", "µs", names),
    loss: chart("chart-loss", "lost, reordered, duplicated", "frames", ["lost", "reordered", "duplicated"]),
    latency: chart("chart-latency", "latency", "µs", per(["p50", "p99", "p99.9"])),
  };
}

function pushSnapshot(snap) {
  const t = snap.elapsed_s;
  if (!state.charts.rate) startCharts(snap.streams.map((s) => s.name));
  const c = state.charts;
  const rx = (s, k) => (s.rx ? s.rx[k] : null);
  const us = (v) => (v == null ? null : v / 1000);
  const add = (ch, values) => {
    ch.data[0].push(t);
    values.forEach((v, k) => ch.data[k + 1].push(v));
    ch.plot.setData(ch.data);
  };
  add(c.rate, snap.streams.flatMap((s) => [s.tx.rate_pps, rx(s, "rate_pps")]));
  add(c.lateness, snap.streams.map((s) => us(s.tx.lag_ns)));
  const tot = snap.total.rx || {};
  add(c.loss, [tot.lost ?? null, tot.reordered ?? null, tot.duplicated ?? null]);
  add(c.latency, snap.streams.flatMap((s) => [us(rx(s, "latency_p50_ns")), us(rx(s, "latency_p99_ns")), us(rx(s, "latency_p99_9_ns"))]));
  $("#run-state").textContent = `run ${state.run}: ${t.toFixed(1)} s, sent ${snap.total.tx.sent}` + (snap.total.rx ? `, received ${snap.total.rx.received}` : "");
}

function runOptions() {
  const body = { options: {} };
  const t = $("#target").value;
  if (t === "testbed") body.testbed = $("#testbed").value.trim();
  else if (t === "null") body.options.null = true;
  else for (const k of ["iface", "netns", "rx", "rx_netns"]) { const v = $("#" + k).value.trim(); if (v) body.options[k] = v; }
  const d = $("#duration").value;
  if (d) body.options.duration = Number(d);
  const cal = $("#calibration").value;
  if (cal) body.calibration = Number(cal);
  return body;
}

async function startRun() {
  $("#run-state").textContent = "starting…";
  await syncFromForm();
  const body = runOptions();
  body.toml = $("#toml").value;
  body.profile = state.name || "unsaved";
  try {
    const r = await api("POST", "/api/runs", body);
    follow(r.id);
  } catch (e) {
    status(e.message, true);
    $("#run-state").textContent = e.message;
  }
}

function follow(id) {
  state.run = id;
  state.charts = {};
  ["chart-rate", "chart-lateness", "chart-loss", "chart-latency"].forEach((c) => $("#" + c).replaceChildren());
  $("#start").disabled = true;
  $("#stop").disabled = false;
  $("#run-state").textContent = `run ${id} started`;
  if (state.source) state.source.close();
  const es = new EventSource(withToken(`/api/runs/${id}/events`));
  state.source = es;
  es.addEventListener("snapshot", (ev) => pushSnapshot(JSON.parse(ev.data)));
  es.addEventListener("end", (ev) => {
    es.close();
    const end = JSON.parse(ev.data);
    $("#start").disabled = false;
    $("#stop").disabled = true;
    const link = el("a", { href: "#", id: "open-report", text: "open its report", onclick: (e) => { e.preventDefault(); showTab("history"); showRun(id); } });
    $("#run-state").replaceChildren(`run ${id} ${end.status}` + (end.error ? ": " + end.error : "") + " — ", link);
    loadRuns();
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) status("lost the run's event stream", true); };
}

async function stopRun() {
  if (state.run != null) await api("POST", `/api/runs/${state.run}/stop`);
}

// ---- history -------------------------------------------------------------------------

const fmt = (v) => (v == null ? "" : typeof v === "number" ? (Number.isInteger(v) ? v.toLocaleString("en") : v.toFixed(1)) : String(v));

async function loadRuns() {
  const r = await api("GET", "/api/runs");
  const body = $("#runs tbody");
  body.replaceChildren(...r.runs.map((run) => {
    const b = run.brief || {};
    const tick = el("input", { type: "checkbox", class: "pick", "data-id": String(run.id) });
    tick.addEventListener("click", (e) => { e.stopPropagation(); updateCompare(); });
    const held = b.schedule === "held" ? "held" : b.schedule === "NOT held" ? "not-held" : "";
    return el("tr", { "data-id": String(run.id), onclick: () => showRun(run.id) },
      el("td", {}, tick), el("td", { text: String(run.id) }), el("td", { text: run.profile }),
      el("td", { text: new Date(run.started_ns / 1e6).toLocaleString() }), el("td", { text: run.status }),
      el("td", { text: fmt(b.sent) }), el("td", { text: fmt(b.received) }), el("td", { text: fmt(b.lost) }),
      el("td", { class: held, text: b.schedule || "" }));
  }));
  updateCompare();
}

function updateCompare() {
  $("#compare").disabled = document.querySelectorAll(".pick:checked").length !== 2;
}

// ---- the report: verdict banner, tiles, tables, plots (every figure from the result JSON) --

const num = (v) => (typeof v === "number" && isFinite(v) ? v : null);
const sumOf = (list, f) => list.reduce((a, x) => a + (num(f(x)) ?? 0), 0);
const maxOf = (list, f) => list.reduce((a, x) => (num(f(x)) == null ? a : a == null ? f(x) : Math.max(a, f(x))), null);
const show = (v, digits = 1) => (v == null ? "–" : Number.isInteger(v) ? v.toLocaleString("en") : v.toLocaleString("en", { maximumFractionDigits: digits }));

function banner(r) {
  const v = r.verdict || {};
  const rxv = (r.rx && r.rx.verdict) || null;
  const held = v.schedule === "held";
  const cal = r.rx && r.rx.calibration;
  const lines = [
    el("div", { class: "banner-title", text: `schedule: ${v.schedule || "unknown"}` }),
    el("ul", { class: "causes" }, ...(v.causes || []).map((c) => el("li", { text: c }))),
    el("div", { class: "banner-line", "data-key": "measurement", text: rxv ? `measurement: ${rxv.measurement}` + (rxv.reasons && rxv.reasons.length ? ` (${rxv.reasons.join("; ")})` : "") : "measurement: no meter" }),
    el("div", { class: "banner-line", "data-key": "calibration", text: cal ? `calibration: ${cal.path || "used"}, latency offset ${show(num(cal.latency_offset_ns))} ns` + (cal.subtracted === false ? " (not subtracted)" : " subtracted") + (cal.valid === false ? ` — not valid: ${cal.invalid_reason || ""}` : "") : "calibration: none" }),
  ];
  return el("div", { class: "banner " + (held ? "held" : v.schedule === "NOT held" ? "not-held" : "unknown"), "data-schedule": v.schedule || "" }, ...lines);
}

function tile(key, label, value, unit, note) {
  return el("div", { class: "tile", "data-key": key, "data-value": value == null ? "" : String(value) },
    el("div", { class: "tile-value", text: show(value) + (unit ? " " + unit : "") }),
    el("div", { class: "tile-label", text: label }),
    note ? el("div", { class: "tile-note", text: note }) : "");
}

/// The key figures; each tile's data-value is the number taken from the result.
function tiles(r) {
  const rs = (r.rx && r.rx.streams) || [];
  const lat = rs.map((s) => s.latency).filter(Boolean);
  const ia = rs.map((s) => s.interarrival).filter(Boolean);
  const us = (ns) => (ns == null ? null : ns / 1000);
  const pct = (k) => us(maxOf(lat, (l) => l.percentiles_ns && l.percentiles_ns[k]));
  const subtracted = lat.some((l) => l.offset_subtracted_ns) ? "calibration subtracted" : "no calibration subtracted";
  const errPpm = maxOf(r.streams || [], (s) => (num(s.rate_error_rel) == null ? null : Math.abs(s.rate_error_rel) * 1e6));
  const jitter = rs.flatMap((s) => (s.rate_jitter || []).slice(0, 1));
  const burst = maxOf(jitter, (j) => j.max_pps);
  const ref = ia.length ? ia[0].gap_reference : "";
  return el("div", { class: "tiles" },
    tile("sent", "sent", num(r.sent_frames), "frames"),
    tile("received", "received", rs.length ? sumOf(rs, (s) => s.rx_frames) : null, "frames"),
    tile("lost", "lost", rs.length ? sumOf(rs, (s) => s.lost_vs_tx) : null, "frames"),
    tile("reordered", "reordered", rs.length ? sumOf(rs, (s) => s.seq && s.seq.reordered) : null, "frames"),
    tile("duplicated", "duplicated", rs.length ? sumOf(rs, (s) => s.seq && s.seq.duplicated) : null, "frames"),
    tile("longest_outage", "longest outage", outage(rs), "ms", rs.length ? `${sumOf(rs, (s) => s.loss_episodes && s.loss_episodes.count)} loss episodes` : ""),
    tile("achieved_pps", "achieved rate", num(r.achieved_pps), "frames/s"),
    tile("rate_error_ppm", "rate error (worst stream)", errPpm, "ppm"),
    tile("latency_p50", "latency p50", pct("p50"), "µs", subtracted),
    tile("latency_p99", "latency p99", pct("p99"), "µs", subtracted),
    tile("latency_p99_9999", "latency p99.9999", pct("p99_9999"), "µs", subtracted),
    tile("latency_max", "latency max", us(maxOf(lat, (l) => l.max_ns)), "µs", subtracted),
    tile("lateness_p99", "departure lateness p99", num(r.lateness && r.lateness.p99_ns), "ns"),
    tile("interarrival_err_p50", "inter-arrival |err| p50", maxOf(ia, (i) => i.abs_err_p50_ns), "ns", ref ? `against the ${ref}` : ""),
    tile("microburst_pps", "worst microburst window", burst, "frames/s", jitter.length ? `over ${jitter[0].packets} frames` : ""));
}

/// The longest loss episode's span over the streams, in ms (null without a meter).
function outage(rs) {
  const ns = maxOf(rs, (s) => s.loss_episodes && s.loss_episodes.longest_ns);
  return rs.length ? (ns == null ? 0 : ns / 1e6) : null;
}

/// A sortable table (click a heading) in a box of its own that scrolls.
function table(cls, heads, rows) {
  const body = el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((v) => el("td", { text: show(v), "data-v": v == null ? "" : String(v) })))));
  const t = el("table", { class: "report-table " + cls },
    el("thead", {}, el("tr", {}, ...heads.map((h, k) => el("th", { text: h, title: "sort", onclick: () => sortBy(body, k) })))), body);
  return el("div", { class: "table-box" }, t);
}

function sortBy(body, k) {
  const rows = [...body.rows];
  const key = (tr) => { const v = tr.cells[k].dataset.v; const n = Number(v); return v !== "" && !isNaN(n) ? n : v; };
  const up = body.dataset.sorted !== String(k);
  rows.sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * (up ? 1 : -1));
  body.dataset.sorted = up ? String(k) : "";
  body.replaceChildren(...rows);
}

function tables(r) {
  const tx = (r.streams || []).map((s) => [s.name, s.sent_frames, s.target_pps, s.achieved_pps, num(s.rate_error_rel) == null ? null : s.rate_error_rel * 1e6,
    s.lateness && s.lateness.p99_ns, s.lateness && s.lateness.late_over_one_gap]);
  const rxs = ((r.rx && r.rx.streams) || []).map((s) => {
    const p = (s.latency && s.latency.percentiles_ns) || {};
    const us = (v) => (v == null ? null : v / 1000);
    const ep = s.loss_episodes || {};
    return [s.name, s.rx_frames, s.lost_vs_tx, ep.count, ep.longest_ns == null ? null : ep.longest_ns / 1e6, s.seq && s.seq.reordered,
      s.seq && s.seq.duplicated, us(p.p50), us(p.p99), us(p.p99_9), s.interarrival && s.interarrival.abs_err_p50_ns,
      s.interarrival && s.interarrival.gap_reference];
  });
  return el("div", { class: "report-tables" },
    el("h3", { text: "TX per stream" }),
    table("tx", ["stream", "sent", "target pps", "achieved pps", "rate err ppm", "lateness p99 ns", "late > 1 gap"], tx),
    rxs.length ? el("h3", { text: "RX per stream" }) : "",
    rxs.length ? table("rx", ["stream", "received", "lost", "loss episodes", "longest outage ms", "reordered", "duplicated", "latency p50 µs",
      "p99 µs", "p99.9 µs", "|err| p50 ns", "reference"], rxs) : "");
}

/// One uPlot plot in a box: zoom by dragging, values on hover (its legend). `log`: true for
/// both axes on a log scale, "x" for the x axis only.
function plotBox(key, title, xlabel, ylabel, data, names, log) {
  const box = el("div", { class: "report-plot", "data-key": key });
  requestAnimationFrame(() => {
    const value = (u, v) => (v == null ? "--" : tick(v));
    const series = [{ label: xlabel, value }].concat(names.map((n, k) => ({ label: n, value, stroke: palette[k % palette.length], width: 1.5, points: { show: true }, spanGaps: true })));
    const opts = { title, width: Math.max(280, box.clientWidth || 420), height: 220, series,
      scales: { x: { time: false, distr: log ? 3 : 1 }, y: { distr: log === true ? 3 : 1 } },
      axes: [{ label: xlabel }, { label: ylabel, size: 70, values: (u, vals) => vals.map(tick) }] };
    box._plot = new uPlot(opts, data, box);
    // The plot follows its box: a narrower window never leaves it wider than the page.
    new ResizeObserver(() => {
      const w = Math.max(280, box.clientWidth);
      if (Math.abs(w - box._plot.width) > 2) box._plot.setSize({ width: w, height: 220 });
    }).observe(box);
  });
  return box;
}

/// An axis label: small fractions as powers of ten (a log axis reaches 1e-6).
const tick = (v) => (v == null ? "" : v !== 0 && Math.abs(v) < 0.01 ? v.toExponential(0) : v.toLocaleString("en"));

const PCT = [["p50", 0.5], ["p90", 0.1], ["p99", 0.01], ["p99_9", 1e-3], ["p99_99", 1e-4], ["p99_999", 1e-5], ["p99_9999", 1e-6]];

/// (x at each bucket's upper end in µs, CDF) of histogram buckets [lowest ns, highest ns, count].
function cdfOf(buckets) {
  const total = buckets.reduce((a, b) => a + b[2], 0) || 1;
  let acc = 0;
  const xs = [], ys = [];
  for (const [, hi, c] of buckets) {
    acc += c;
    if (hi > 0) { xs.push(hi / 1000); ys.push(acc / total); }
  }
  return [xs, ys];
}

/// Plots from the decoded histograms (the server's `histograms` of a run), where there are.
function histogramPlots(h) {
  const name = Object.keys(h || {}).find((n) => h[n] && h[n].latency && h[n].latency.length);
  const out = [];
  if (name) {
    const [xs, cdf] = cdfOf(h[name].latency);
    out.push(plotBox("latency-cdf", `latency CDF (${name})`, "latency µs", "fraction at or below", [xs, cdf], ["P(latency ≤ x)"], "x"));
    const tail = xs.map((x, k) => [x, 1 - cdf[k]]).filter(([, q]) => q > 0);
    out.push(plotBox("latency-ccdf", `latency CCDF (${name})`, "latency µs", "fraction above",
      [tail.map((p) => p[0]), tail.map((p) => p[1])], ["P(latency > x)"], true));
  }
  const ia = Object.keys(h || {}).find((n) => h[n] && h[n].interarrival && h[n].interarrival.length);
  if (ia) {
    const b = h[ia].interarrival;
    out.push(plotBox("interarrival", `inter-arrival histogram (${ia})`, "gap µs", "frames",
      [b.map(([lo, hi]) => (lo + hi) / 2000), b.map(([, , c]) => c)], ["frames"], false));
  }
  return out;
}

function plots(r, hist) {
  const rs = (r.rx && r.rx.streams) || [];
  const fromHist = histogramPlots(hist);
  const out = [...fromHist];
  const withLat = fromHist.length ? [] : rs.filter((s) => s.latency && s.latency.percentiles_ns);
  if (withLat.length) {
    const p = withLat[0].latency.percentiles_ns;
    const pts = PCT.filter(([k]) => num(p[k]) != null && p[k] > 0);
    out.push(plotBox("latency-ccdf", `latency CCDF (${withLat[0].name}, from its percentiles)`, "latency µs", "fraction above",
      [pts.map(([k]) => p[k] / 1000), pts.map(([, q]) => q)], ["P(latency > x)"], true));
  }
  const withIa = fromHist.length ? [] : rs.filter((s) => s.interarrival && num(s.interarrival.p50_ns) != null);
  if (withIa.length) {
    const i = withIa[0].interarrival;
    const pts = [["p1_ns", 0.01], ["p50_ns", 0.5], ["p99_ns", 0.99], ["p99_9_ns", 0.999]].filter(([k]) => num(i[k]) != null);
    out.push(plotBox("interarrival", `inter-arrival CDF (${withIa[0].name}, target ${show(i.target_gap_ns)} ns)`, "gap µs", "fraction below",
      [pts.map(([k]) => i[k] / 1000), pts.map(([, q]) => q)], ["P(gap ≤ x)"], false));
  }
  const withJ = rs.filter((s) => s.rate_jitter && s.rate_jitter.length);
  if (withJ.length) {
    const j = withJ[0].rate_jitter;
    out.push(plotBox("rate-jitter", `rate jitter (${withJ[0].name})`, "window, frames", "% of target",
      [j.map((w) => w.packets), j.map((w) => w.min_pct), j.map((w) => w.avg_pct), j.map((w) => w.max_pct)], ["min", "avg", "max"], false));
  }
  const withS = rs.filter((s) => s.series && s.series.length);
  if (withS.length) {
    const t = withS[0].series.map((x) => x.t_s);
    const width = (k) => (t.length > 1 ? (t[Math.min(k + 1, t.length - 1)] - t[Math.max(k - 1, 0)]) / (k === 0 || k === t.length - 1 ? 1 : 2) : 1) || 1;
    out.push(plotBox("rx-rate", "RX rate over time", "s", "frames/s",
      [t].concat(withS.map((s) => s.series.map((x, k) => x.rx_frames / width(k)))), withS.map((s) => s.name), false));
  }
  return el("div", { class: "report-plots" }, ...out);
}

/// A run across hosts (`spans_hosts`): its verdict, key figures, flows, ports, and a section
/// per agent with its clock, its offset to the controller and its start skew.
function hostsView(r) {
  const v = r.verdict || {};
  const flows = r.flows || [];
  const us = (ns) => (ns == null ? null : ns / 1000);
  const doubts = (v.latency_doubts || []).map((d) => el("li", { text: `latency of ${d.flow}: ${d.why}` }));
  const lost = (v.agents_lost || []).map((a) => el("li", { text: `agent ${a.agent} lost: ${a.why}` }));
  const ok = r.ending === "finished" && v.latency === "trusted";
  const banner = el("div", { class: "banner " + (ok ? "held" : "not-held"), "data-ending": r.ending || "" },
    el("div", { class: "banner-title", text: `run across ${(r.agents || []).length} hosts: ${r.ending}` }),
    el("div", { class: "banner-line", "data-key": "latency", text: `cross-host latency: ${v.latency}` }),
    el("ul", { class: "causes" }, ...lost, ...doubts));
  const worstBound = maxOf(flows, (f) => f.latency_bound && f.latency_bound.bound_ns);
  const figures = el("div", { class: "tiles" },
    tile("sent", "sent", sumOf(flows, (f) => f.frames_tx), "frames"),
    tile("received", "received", sumOf(flows, (f) => f.frames_rx), "frames"),
    tile("lost", "lost (seq)", sumOf(flows, (f) => f.seq && f.seq.lost), "frames"),
    tile("max_start_skew", "worst start skew", us(num(v.max_start_skew_ns)), "µs"),
    tile("latency_p50", "latency p50 (worst flow)", us(maxOf(flows, (f) => f.latency && f.latency.percentiles_ns && f.latency.percentiles_ns.p50)), "µs"),
    tile("latency_bound", "latency bound (worst flow)", us(worstBound), "µs", v.latency === "trusted" ? "" : "NOT trusted"));
  const flowRows = flows.map((f) => {
    const p = (f.latency && f.latency.percentiles_ns) || {};
    const b = f.latency_bound || {};
    return [f.name, `${f.agents.tx} → ${f.agents.rx}`, f.frames_tx, f.frames_rx, f.seq && f.seq.lost, f.seq && f.seq.reordered,
      us(p.p50), us(p.p99), us(b.bound_ns), b.trusted ? "yes" : `no: ${b.doubt || ""}`];
  });
  const portRows = (r.ports || []).map((p) => [p.name, p.frames_tx, p.frames_rx, us(p.latency && p.latency.percentiles_ns.p50), us(p.latency && p.latency.percentiles_ns.p99_9)]);
  const agents = (r.agents || []).map((a) => el("section", { class: "agent", "data-agent": a.agent },
    el("h3", { text: `agent ${a.agent}` + (a.lost ? ` — LOST: ${a.lost}` : "") }),
    table("agent", ["TX ports", "RX ports", "offset µs", "± µs", "clock", "start", "start skew µs"], [[
      (a.tx_ports || []).join(", "), (a.rx_ports || []).join(", "), us(a.offset && a.offset.offset_ns), us(a.offset && a.offset.bound_ns),
      a.clock_untrusted || "synchronised", a.start_from || "", (a.start_skew_ns || []).map((s) => `${s.port}: ${show(us(s.skew_ns), 3)}`).join(", ")]])));
  return el("div", { class: "hosts-view" }, banner, figures,
    el("h3", { text: "flows" }),
    table("flows", ["flow", "agents", "sent", "received", "lost", "reordered", "latency p50 µs", "p99 µs", "bound ± µs", "trusted"], flowRows),
    el("h3", { text: "ports" }), table("ports", ["port", "sent", "received", "latency p50 µs", "p99.9 µs"], portRows), ...agents);
}

function runView(run) {
  const files = run.files || [];
  const url = (f) => withToken(`/api/runs/${run.id}/files/${encodeURIComponent(f)}`);
  const downloads = el("div", { class: "downloads" }, ...files.map((f) => el("a", { href: url(f), download: f, text: f })));
  const cp = run.result && run.result.checkpoint ? el("p", { class: "field-error", text: "interrupted: these are the figures of its last checkpoint" }) : "";
  const hosts = run.result && (run.result.spans_hosts ? run.result : run.result.checkpoint && run.result.checkpoint.spans_hosts ? run.result.checkpoint : null);
  const r = run.result && !run.result.checkpoint && !hosts ? run.result : null;
  const text = el("details", { class: "text" }, el("summary", { text: "text" }),
    el("pre", { class: "summary", text: run.summary || JSON.stringify(run.result && run.result.checkpoint, null, 1) || "" }));
  return el("div", { class: "run-view", "data-run": String(run.id) },
    el("h2", { text: `Run ${run.id}: ${run.profile} (${run.status})` }),
    run.error ? el("p", { class: "field-error", text: run.error }) : "", cp,
    hosts ? hostsView(hosts) : "",
    r ? banner(r) : "", r ? tiles(r) : "", r ? tables(r) : "", r ? plots(r, run.histograms) : "",
    text, el("h3", { text: "files" }), downloads);
}

async function showRun(id) {
  const run = await api("GET", `/api/runs/${id}`);
  $("#run-detail").replaceChildren(runView(run));
}

async function compareRuns() {
  // The older run first: differences read newer − older.
  const ids = [...document.querySelectorAll(".pick:checked")].map((e) => Number(e.dataset.id)).sort((a, b) => a - b);
  const runs = await Promise.all(ids.map((id) => api("GET", `/api/runs/${id}`)));
  const row = (label, f) => el("tr", {}, el("th", { text: label }), ...runs.map((r) => el("td", { text: fmt(f(r.result || {})) })));
  const rx = (r, k) => (r.rx ? r.rx.streams.reduce((a, s) => a + (s[k] || 0), 0) : null);
  const lat = (r, p) => (r.rx && r.rx.streams[0] && r.rx.streams[0].latency ? r.rx.streams[0].latency.percentiles_ns[p] / 1000 : null);
  const table = el("table", { class: "compare-table" },
    el("thead", {}, el("tr", {}, el("th"), ...runs.map((r) => el("th", { text: `run ${r.id} (${r.profile})` })))),
    el("tbody", {}, row("sent", (r) => r.sent_frames), row("achieved pps", (r) => r.achieved_pps), row("received", (r) => rx(r, "rx_frames")),
      row("lost vs tx", (r) => rx(r, "lost_vs_tx")), row("latency p50 (µs)", (r) => lat(r, "p50")), row("latency p99 (µs)", (r) => lat(r, "p99")),
      row("latency p99.9 (µs)", (r) => lat(r, "p99_9")), row("lateness p99 (ns)", (r) => r.lateness && r.lateness.p99_ns),
      row("schedule", (r) => r.verdict && r.verdict.schedule)));
  $("#run-detail").replaceChildren(el("h2", { text: "Comparison" }), compareTiles(runs), compareCdf(runs), table,
    el("div", { class: "compare" }, ...runs.map(runView)));
}

/// The second run's key figures against the first's: each tile has both values and the
/// difference (data-a, data-b, data-diff from the results' tiles).
function compareTiles(runs) {
  const [a, b] = runs.map((r) => (r.result && !r.result.checkpoint ? tiles(r.result) : null));
  if (!a || !b) return el("p", { text: "both runs need a stored result to compare figures" });
  const out = [...a.children].map((ta) => {
    const key = ta.dataset.key;
    const tb = b.querySelector(`.tile[data-key="${key}"]`);
    const va = ta.dataset.value === "" ? null : Number(ta.dataset.value);
    const vb = tb && tb.dataset.value !== "" ? Number(tb.dataset.value) : null;
    const d = va == null || vb == null ? null : vb - va;
    const label = ta.querySelector(".tile-label").textContent;
    return el("div", { class: "tile", "data-key": key, "data-a": String(va ?? ""), "data-b": String(vb ?? ""), "data-diff": String(d ?? "") },
      el("div", { class: "tile-value", text: d == null ? "–" : (d > 0 ? "+" : "") + show(d) }),
      el("div", { class: "tile-label", text: `${label}: run ${runs[1].id} − run ${runs[0].id}` }),
      el("div", { class: "tile-note", text: `${show(va)} → ${show(vb)}` }));
  });
  return el("div", { class: "tiles compare-tiles" }, ...out);
}

/// Both runs' latency CCDFs on one plot: from each run's histogram (its first stream with
/// one), or from its percentiles where it has none.
function compareCdf(runs) {
  const curve = (r) => {
    const h = r.histograms || {};
    const name = Object.keys(h).find((n) => h[n] && h[n].latency && h[n].latency.length);
    if (name) {
      const [xs, cdf] = cdfOf(h[name].latency);
      const tail = xs.map((x, k) => [x, 1 - cdf[k]]).filter(([, q]) => q > 0);
      return [tail.map((p) => p[0]), tail.map((p) => p[1])];
    }
    const s = ((r.result && r.result.rx && r.result.rx.streams) || []).find((x) => x.latency && x.latency.percentiles_ns);
    if (!s) return null;
    const p = s.latency.percentiles_ns;
    const pts = PCT.filter(([k]) => num(p[k]) != null && p[k] > 0);
    return [pts.map(([k]) => p[k] / 1000), pts.map(([, q]) => q)];
  };
  const cs = runs.map(curve);
  if (cs.some((c) => !c)) return "";
  return plotBox("compare-ccdf", "latency CCDF, both runs", "latency µs", "fraction above", uPlot.join(cs),
    runs.map((r) => `run ${r.id}`), true);
}

// ---- experiments ---------------------------------------------------------------------

// An experiment file on testbed `tb`: `method`, its own [trial] keys and method table, and a
// one-stream profile (its rate and size are set per trial).
// With `both`, the testbed's two ends send to each other at once (ports, pairs).
const experimentText = (tb, name, method, trial, table, both = false) => `name = "${name}"
method = "${method}"
${both ? `ports = [{ iface = "${tb}-tx0", netns = "${tb}-tx" }, { iface = "${tb}-rx0", netns = "${tb}-rx" }]
pairs = "bidirectional"` : `tx = { iface = "${tb}-tx0", netns = "${tb}-tx" }
rx = { iface = "${tb}-rx0", netns = "${tb}-rx" }`}

[trial]
duration_s = 1
warmup_s = 0.2
settle_s = 0.2
${trial}

${table}

[profile]
seed = 1
[[profile.stream]]
name = "s"
size = 64
[profile.stream.timing]
rate_pps = 1000
`;

const EXP_PRESETS = {
  sweep: (tb) => experimentText(tb, "rate-sweep", "sweep", "repetitions = 2",
    '[sweep]\nparameter = "rate"\nvalues = [5000, 10000, 20000]'),
  rfc2544: (tb) => experimentText(tb, "rfc2544-64B", "rfc2544", "max_retries = 2",
    '[rfc2544]\ntests = ["throughput"]\nframe_sizes = [64]\nloss_tolerance_pct = [0]\nmax_rate_pps = 50000\nmin_rate_pps = 1000\nresolution_pct = 2'),
  mlrsearch: (tb) => experimentText(tb, "mlrsearch-64B", "mlrsearch", "max_retries = 2",
    '[mlrsearch]\ngoals = [{ name = "NDR", loss_ratio = 0.0 }, { name = "PDR", loss_ratio = 0.005 }]\n' +
    'final_trial_duration_s = 1\ninitial_trial_duration_s = 0.25\nmax_rate_pps = 50000\nmin_rate_pps = 1000\nwidth_goal = 0.01\nlatency_at = [0.1, 0.5, 0.9]'),
  "mlrsearch-bidir": (tb) => experimentText(tb, "mlrsearch-bidirectional-64B", "mlrsearch", "max_retries = 2",
    '[mlrsearch]\ngoals = [{ name = "NDR", loss_ratio = 0.0 }, { name = "PDR", loss_ratio = 0.005 }]\n' +
    'final_trial_duration_s = 1\ninitial_trial_duration_s = 0.25\nmax_rate_pps = 100000   # aggregate over both directions\nmin_rate_pps = 2000\nwidth_goal = 0.01\nlatency_at = [0.1, 0.5, 0.9]', true),
};

function presetExperiment() {
  $("#exp-toml").value = EXP_PRESETS[$("#exp-preset").value]($("#exp-testbed").value.trim() || "gl");
}

function trialRow(t) {
  const p = t.plan || {}, r = t;
  return el("tr", {}, el("td", { text: String(t.index) }), el("td", { text: p.purpose || "" }), el("td", { text: fmt(p.rate_pps) }),
    el("td", { text: fmt(p.size) || "profile" }), el("td", { text: fmt(r.sent) }), el("td", { text: fmt(r.received) }),
    el("td", { text: fmt(t.loss_pct) }), el("td", { class: t.valid ? "held" : "not-held", text: t.valid ? "valid" : t.invalid_reason || "invalid" }));
}

async function startExperiment() {
  $("#exp-trials tbody").replaceChildren();
  try {
    const r = await api("POST", "/api/experiments", $("#exp-toml").value, true);
    followExperiment(r.id);
  } catch (e) {
    $("#exp-state").textContent = e.message;
    status(e.message, true);
  }
}

function followExperiment(id) {
  state.experiment = id;
  $("#exp-start").disabled = true;
  $("#exp-stop").disabled = false;
  $("#exp-state").textContent = `experiment ${id} started`;
  const es = new EventSource(withToken(`/api/experiments/${id}/events`));
  es.addEventListener("trial", (ev) => {
    const t = JSON.parse(ev.data);
    $("#exp-trials tbody").append(trialRow(t));
    $("#exp-state").textContent = `experiment ${id}: trial ${t.index} judged`;
  });
  es.addEventListener("end", (ev) => {
    es.close();
    const end = JSON.parse(ev.data);
    $("#exp-start").disabled = false;
    $("#exp-stop").disabled = true;
    $("#exp-state").textContent = `experiment ${id} ${end.status}` + (end.error ? ": " + end.error : "");
    loadExperiments();
    showExperiment(id);
  });
}

async function loadExperiments() {
  const r = await api("GET", "/api/experiments");
  $("#exp-list tbody").replaceChildren(...r.experiments.map((x) => el("tr", { "data-id": String(x.id), onclick: () => showExperiment(x.id) },
    el("td", { text: String(x.id) }), el("td", { text: x.name }), el("td", { text: new Date(x.started_ns / 1e6).toLocaleString() }),
    el("td", { text: x.status }), el("td", { text: String(x.trials) }))));
}

async function showExperiment(id) {
  const x = await api("GET", `/api/experiments/${id}`);
  const url = (f) => withToken(`/api/experiments/${id}/files/${encodeURIComponent(f)}`);
  const files = x.files || [];
  $("#exp-detail").replaceChildren(el("div", { class: "exp-view", "data-experiment": String(id) },
    el("h2", { text: `Experiment ${id}: ${x.name} (${x.status})` }),
    x.error ? el("p", { class: "field-error", text: x.error }) : "",
    experimentReport(x),
    el("details", { class: "text" }, el("summary", { text: "text" }), el("pre", { class: "summary", text: x.summary || "" })),
    el("h3", { text: "files" }),
    el("div", { class: "downloads" }, ...files.map((f) => el("a", { href: url(f), download: f, text: f })))));
}

/// The trials as a sortable table, and the offered rate against loss and received rate.
function experimentReport(x) {
  const trials = (x.result && (x.result.trials || (x.result.checkpoint && x.result.checkpoint.trials))) || [];
  if (!trials.length) return "";
  const rows = trials.map((t) => { const p = t.plan || {}; return [t.index, p.purpose || "", p.rate_pps, p.size ?? "profile", t.sent, t.received, t.loss_pct, t.valid ? "valid" : t.invalid_reason || "invalid"]; });
  const byRate = [...trials].filter((t) => t.plan && num(t.plan.rate_pps) != null).sort((a, b) => a.plan.rate_pps - b.plan.rate_pps);
  return el("div", { class: "exp-report" },
    x.result.mlrsearch ? mlrReport(x.result.mlrsearch) : "",
    x.result.rfc2889 ? rfc2889Report(x.result.rfc2889) : "",
    (x.result.directions || []).length ? directionsReport(x.result.directions) : "",
    el("h3", { text: "trials" }),
    table("trials", ["#", "purpose", "rate pps", "size", "sent", "received", "loss %", "judged"], rows),
    el("div", { class: "report-plots" },
      plotBox("exp-loss", "loss against offered rate", "offered frames/s", "loss %",
        [byRate.map((t) => t.plan.rate_pps), byRate.map((t) => num(t.loss_pct))], ["loss %"], false),
      plotBox("exp-received", "received against offered", "offered frames/s", "received frames",
        [byRate.map((t) => t.plan.rate_pps), byRate.map((t) => num(t.sent)), byRate.map((t) => num(t.received))], ["sent", "received"], false)));
}

/// MLRsearch first: each goal's conditional throughput and bounds, latency at the fractions,
/// and every trial's load against the search's time, one series per goal it served.
function mlrReport(m) {
  const goals = m.goals.map((g) => [g.name, g.loss_ratio, g.conditional_throughput_pps, g.lower_bound_pps, g.upper_bound_pps, g.met ? "met" : "NOT met"]);
  // Over several ports the latency is each direction's (the table by direction), not here.
  const lat = (m.latency || []).map((l) => [`${Math.round(l.fraction * 100)} % of ${l.goal}`, l.rate_pps,
    ...["latency_p50_ns", "latency_p99_ns", "latency_p99_9_ns"].map((k) => (l.point[k] ? l.point[k].mean / 1e3 : null))])
    .filter((r) => r.slice(2).some((v) => v != null));
  const names = [...new Set(m.trials.map((t) => t.goal || "initial"))];
  const xs = [], ys = names.map(() => []);
  let at = 0;
  for (const t of m.trials) {
    xs.push(at);
    names.forEach((n, k) => ys[k].push((t.goal || "initial") === n ? t.load_pps : null));
    at += t.duration_s;
  }
  return el("div", { class: "mlr-report" },
    el("h3", { text: `MLRsearch (RFC 9971): ${m.trials.length} trials, ${fmt(m.trial_seconds)} trial seconds` }),
    table("mlr-goals", ["goal", "loss ratio", "conditional throughput pps", "lower bound pps", "upper bound pps", ""], goals),
    lat.length ? table("mlr-latency", ["load", "rate pps", "p50 µs", "p99 µs", "p99.9 µs"], lat) : "",
    el("div", { class: "report-plots" },
      plotBox("exp-mlr", "each trial's load, by the goal it served", "trial seconds so far", "load frames/s", [xs, ...ys], names, false)));
}

/// Each direction at the trials the results rest on: its load, loss and latency.
function directionsReport(dirs) {
  const us = (a, k) => (a.latency ? a.latency.percentiles_ns[k] / 1e3 : null);
  const rows = dirs.flatMap((d) => d.at.map((a) => [d.name, a.what, a.offered_pps, a.sent, a.received, a.loss_ratio,
    us(a, "p50"), us(a, "p99"), us(a, "p99_9"), us(a, "p99_9999")]));
  return el("div", { class: "directions-report" },
    el("h3", { text: `by direction (${dirs.length}): the search judged their aggregate` }),
    table("directions", ["direction", "at", "offered pps", "sent", "received", "loss ratio", "p50 µs", "p99 µs", "p99.9 µs", "p99.9999 µs"], rows));
}

/// RFC 2889: each test's figure and the procedure it came from.
function rfc2889Report(x) {
  const rows = [];
  const c = x.address_caching, l = x.address_learning_rate, m = x.fully_meshed;
  if (c) rows.push(["address caching capacity", c.capacity, `${c.addresses} test addresses + ${c.own_entries} own`, c.procedure]);
  if (l) rows.push(["address learning rate (frames/s)", l.rate_pps, `${l.addresses} addresses`, l.procedure]);
  if (m) rows.push(["fully meshed throughput (frames/s)", m.throughput_pps, `forwarding ${fmt(m.forwarding_rate_pps)} at ${fmt(m.offered_pps)} offered`, m.procedure]);
  const cc = x.congestion_control, yn = (b) => b == null ? "not judged" : (b ? "yes" : "no");
  if (cc) rows.push(["congestion control", `head-of-line blocking ${yn(cc.head_of_line_blocking)}, back pressure ${yn(cc.back_pressure)}`,
    `lost: uncongested ${fmt(cc.uncongested_loss_pct)} %, congested ${fmt(cc.congested_loss_pct)} % (expected ${fmt(cc.expected_congested_loss_pct)} %)${cc.not_judged ? "; not judged: " + cc.not_judged : ""}`, cc.procedure]);
  return el("div", { class: "rfc2889-report" }, el("h3", { text: "RFC 2889" }), table("rfc2889", ["test", "result", "detail", "procedure"], rows));
}

async function stopExperiment() {
  if (state.experiment != null) await api("POST", `/api/experiments/${state.experiment}/stop`);
}

// ---- calibrations --------------------------------------------------------------------

async function loadCalibrations() {
  const r = await api("GET", "/api/calibrations");
  const sel = $("#calibration");
  const keep = sel.value;
  sel.replaceChildren(el("option", { value: "", text: "none" }), ...r.calibrations.map((c) => el("option", { value: String(c.id), text: `#${c.id} (${c.calibration.valid ? "valid" : "invalid"})` })));
  sel.value = keep;
  $("#cal-list tbody").replaceChildren(...r.calibrations.map((c) => {
    const k = c.calibration;
    return el("tr", {}, el("td", { text: String(c.id) }), el("td", { text: new Date(c.created_ns / 1e6).toLocaleString() }),
      el("td", { text: String(k.valid) }), el("td", { text: fmt(k.latency_offset_ns) + " ns" }), el("td", { text: fmt(k.floor_abs_err_p99_ns) + " ns" }));
  }));
}

async function calibrate() {
  $("#cal-result").textContent = "calibrating…";
  try {
    const r = await api("POST", "/api/calibrations", { testbed: $("#cal-testbed").value.trim(), rate_pps: Number($("#cal-rate").value), duration: Number($("#cal-duration").value) });
    $("#cal-result").textContent = r.summary;
    loadCalibrations();
  } catch (e) {
    $("#cal-result").textContent = e.message;
  }
}

// ---- wiring --------------------------------------------------------------------------

function showTab(name) {
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.dataset.tab === name));
  document.querySelectorAll(".pane").forEach((p) => { p.hidden = p.id !== "tab-" + name; });
  if (name === "history") loadRuns();
  if (name === "calibrations") loadCalibrations();
  if (name === "experiments") loadExperiments();
}

function wire() {
  document.querySelectorAll(".tab").forEach((t) => t.addEventListener("click", () => showTab(t.dataset.tab)));
  $("#token-save").addEventListener("click", () => { localStorage.setItem("gapless-token", $("#token").value); $("#token-box").hidden = true; init(); });
  $("#new-profile").addEventListener("click", newProfile);
  $("#save").addEventListener("click", saveProfile);
  $("#duplicate-profile").addEventListener("click", duplicateProfile);
  $("#delete-profile").addEventListener("click", deleteProfile);
  $("#export").addEventListener("click", exportToml);
  $("#import").addEventListener("change", (e) => e.target.files[0] && importToml(e.target.files[0]));
  $("#add-stream").addEventListener("click", () => { state.profile.stream.push(defaultStream(state.profile.stream.length)); profileChanged(true); });
  $("#profile-name").addEventListener("input", (e) => { state.name = e.target.value.trim(); });
  $("#toml").addEventListener("change", tomlEdited);
  $("#target").addEventListener("change", (e) => {
    $("#target-testbed").hidden = e.target.value !== "testbed";
    $("#target-iface").hidden = e.target.value !== "iface";
  });
  $("#start").addEventListener("click", startRun);
  $("#stop").addEventListener("click", stopRun);
  $("#compare").addEventListener("click", compareRuns);
  $("#calibrate").addEventListener("click", calibrate);
  $("#exp-preset").addEventListener("change", presetExperiment);
  $("#exp-testbed").addEventListener("change", presetExperiment);
  $("#exp-start").addEventListener("click", startExperiment);
  $("#exp-stop").addEventListener("click", stopExperiment);
}

async function init() {
  try {
    await loadProfiles();
    await loadCalibrations();
    status("connected");
  } catch (e) {
    status(e.message, true);
  }
}

wire();
presetExperiment();
newProfile();
init();

// For scripts and the browser test: the page's state (profile, run, charts).
window.gapless = { state };
