/* The operator dashboard: plain JavaScript over the sidecar's JSON API (README "Dashboard").
   Every request carries "Authorization: Bearer <token>" when the user pasted a token; the token
   lives in sessionStorage only (gone when the tab closes). */
"use strict";
(function () {
  const TOKEN_KEY = "yarn-sidecar-token";
  const PAGE_QUEUES = 25, PAGE_JOBS = 50, PAGE_DECISIONS = 50;
  const $ = id => document.getElementById(id);
  const state = {
    overview: null,
    queues: { filter: "", leaves: true, page: 0, selected: null, hours: 6 },
    jobs: { state: "", queue: "", cursors: [null], page: 0, next: null },
    decisions: { kind: "", status: "", cursors: [null], page: 0, next: null },
    whatif: { timer: null },
  };

  // ----- plumbing ------------------------------------------------------------------------------
  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function api(path, opts) {
    opts = opts || {};
    const init = { method: opts.method || "GET", headers: headers(opts.body ? { "Content-Type": "application/json" } : {}) };
    if (opts.body) init.body = JSON.stringify(opts.body);
    const r = await fetch(path, init);
    if (!r.ok) {
      let detail = r.status + " " + r.statusText;
      try { const b = await r.json(); if (b.detail) detail = typeof b.detail === "string" ? b.detail : JSON.stringify(b.detail); } catch (e) { /* not JSON */ }
      if (r.status === 401 || r.status === 403) detail += " (paste an API token above)";
      const err = new Error(detail);
      err.status = r.status;
      throw err;
    }
    return opts.raw ? r : r.json();
  }

  function showError(err) {
    const box = $("error");
    if (!err) { box.hidden = true; box.textContent = ""; return; }
    box.hidden = false;
    box.textContent = String(err.message || err);
  }

  // A view reloads whenever the operator clicks, so two loads of one view can overlap; each load
  // takes a ticket, and only the newest ticket may draw, so an older, slower answer never
  // doubles or overwrites what the newer one drew.
  const tickets = {};
  function ticket(view) {
    const mine = (tickets[view] = (tickets[view] || 0) + 1);
    return () => tickets[view] === mine;
  }

  async function guard(fn) {
    try { await fn(); showError(null); } catch (e) { showError(e); }
  }

  function td(row, text, cls) {
    const c = document.createElement("td");
    c.textContent = text === null || text === undefined ? "–" : String(text);
    if (cls) c.className = cls;
    row.appendChild(c);
    return c;
  }

  function num(v, digits) {
    if (v === null || v === undefined) return "–";
    return Number(v).toFixed(digits === undefined ? 2 : digits);
  }

  function when(iso) {
    if (!iso) return "–";
    return iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z");
  }

  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 120) return s + " s ago";
    if (s < 7200) return Math.round(s / 60) + " min ago";
    if (s < 172800) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " days ago";
  }

  function pager(box, page, hasPrev, hasNext, onPrev, onNext, label) {
    box.textContent = "";
    const prev = document.createElement("button");
    prev.textContent = "‹ previous";
    prev.disabled = !hasPrev;
    prev.addEventListener("click", onPrev);
    const next = document.createElement("button");
    next.textContent = "next ›";
    next.disabled = !hasNext;
    next.addEventListener("click", onNext);
    const info = document.createElement("span");
    info.className = "muted";
    info.textContent = label || "page " + (page + 1);
    box.append(prev, info, next);
  }

  // ----- header and routing --------------------------------------------------------------------
  async function loadOverview() {
    state.overview = await api("/overview");
    const o = state.overview;
    $("active-policy").textContent = (o.policy || "–") + " · " + (o.mode || "–");
    if (o.last_good_poll_at) {
      $("poll-age").textContent = "last good poll " + ago(Date.now() - Date.parse(o.last_good_poll_at));
    } else {
      $("poll-age").textContent = "no poll yet";
    }
  }

  const loaders = { queues: loadQueues, jobs: loadJobs, decisions: loadDecisions, policy: loadPolicy, whatif: loadWhatif };

  function route() {
    const page = (location.hash || "#queues").slice(1);
    const name = loaders[page] ? page : "queues";
    for (const p of Object.keys(loaders)) $("page-" + p).hidden = p !== name;
    for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.page === name);
    guard(async () => { await loadOverview(); await loaders[name](); });
  }

  // ----- queues --------------------------------------------------------------------------------
  function visibleQueues() {
    const q = state.queues;
    return (state.overview ? state.overview.queues : [])
      .filter(x => (!q.leaves || x.is_leaf) && x.path.toLowerCase().includes(q.filter.toLowerCase()));
  }

  async function loadQueues() {
    const rows = visibleQueues();
    const q = state.queues;
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_QUEUES));
    q.page = Math.min(q.page, pages - 1);
    const body = $("queue-table").tBodies[0];
    body.textContent = "";
    for (const x of rows.slice(q.page * PAGE_QUEUES, (q.page + 1) * PAGE_QUEUES)) {
      const tr = document.createElement("tr");
      tr.dataset.queue = x.path;
      if (x.path === q.selected) tr.classList.add("selected");
      td(tr, x.path);
      td(tr, num(x.configured)); td(tr, num(x.desired)); td(tr, num(x.pushed));
      td(tr, num(x.used_capacity, 1)); td(tr, num(x.share, 3)); td(tr, num(x.weight, 3));
      td(tr, num(x.debt, 1)); td(tr, num(x.discrimination, 3));
      td(tr, x.drift ? "yes" : "", x.drift ? "bad" : "");
      tr.addEventListener("click", () => { q.selected = x.path; guard(loadQueues); });
      body.appendChild(tr);
    }
    $("queue-count").textContent = rows.length + " queues";
    pager($("queue-pager"), q.page, q.page > 0, q.page < pages - 1,
      () => { q.page--; guard(loadQueues); }, () => { q.page++; guard(loadQueues); },
      "page " + (q.page + 1) + " of " + pages);
    if (!q.selected && rows.length) q.selected = rows[0].path;
    await loadQueueCharts();
  }

  async function loadQueueCharts() {
    const q = state.queues;
    const box = $("queue-charts");
    const current = ticket("queue-charts");
    // cleared at once, so the previous queue's charts never stand under this queue's title
    box.textContent = "";
    if (!q.selected) { $("queue-title").textContent = "No queue recorded yet"; return; }
    $("queue-title").textContent = q.selected;
    const until = new Date();
    const since = new Date(until.getTime() - q.hours * 3600e3);
    // the recorded window may be older than "now - hours" (a replayed or idle cluster): anchor
    // it at the last poll when that is older
    const o = state.overview;
    if (o && o.last_good_poll_at && Date.parse(o.last_good_poll_at) < since.getTime()) {
      until.setTime(Date.parse(o.last_good_poll_at) + 1000);
      since.setTime(until.getTime() - q.hours * 3600e3);
    }
    const params = new URLSearchParams({ path: q.selected, since: since.toISOString(), until: until.toISOString(), points: "400" });
    const s = await api("/queues/series?" + params);
    if (!current()) return;
    const t = s.t.map(Date.parse), dt = s.decision_t.map(Date.parse), lt = s.debt_t.map(Date.parse);
    // one time axis for the four charts, so a change reads across them
    const all = t.concat(dt, lt);
    const xRange = all.length ? [Math.min(...all), Math.max(...all)] : undefined;
    Charts.line(box, { xRange, title: "Capacity", unit: "% of parent", series: [
      { name: "configured", color: "#2457c5", x: t, y: s.capacity },
      { name: "desired", color: "#e07b00", x: dt, y: s.desired, dash: true },
    ] });
    Charts.line(box, { xRange, title: "Usage", unit: "%", series: [
      { name: "used of own capacity", color: "#1e7a3c", x: t, y: s.used_capacity },
      { name: "used of cluster", color: "#7a3c9a", x: t, y: s.absolute_used },
    ] });
    Charts.line(box, { xRange, title: "Policy weight", unit: "", series: [
      { name: "weight", color: "#b3261e", x: dt, y: s.weight },
    ] });
    Charts.line(box, { xRange, title: "LTRF debt", unit: "vcore-s", series: [
      { name: "debt", color: "#444", x: lt, y: s.debt },
    ] });
  }

  // ----- deadline jobs -------------------------------------------------------------------------
  function jobChips() {
    const box = $("job-states");
    box.textContent = "";
    const counts = state.overview ? state.overview.jobs_by_state : {};
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const mk = (value, label) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.state = value;
      b.classList.toggle("on", state.jobs.state === value);
      b.addEventListener("click", () => { state.jobs.state = value; resetJobs(); guard(loadJobs); });
      box.appendChild(b);
    };
    mk("", "all " + total);
    for (const [k, n] of Object.entries(counts).sort()) mk(k, k + " " + n);
    const d = state.overview ? state.overview.deadlines : {};
    const info = document.createElement("span");
    info.className = "muted";
    info.textContent = " deadlines met " + (d.met || 0) + ", missed " + (d.missed || 0);
    box.appendChild(info);
  }

  function resetJobs() { Object.assign(state.jobs, { cursors: [null], page: 0, next: null }); }

  async function loadJobs() {
    jobChips();
    const j = state.jobs;
    const params = new URLSearchParams({ limit: String(PAGE_JOBS) });
    if (j.state) params.set("state", j.state);
    if (j.queue) params.set("queue", j.queue);
    if (j.cursors[j.page]) params.set("cursor", j.cursors[j.page]);
    const current = ticket("jobs");
    const page = await api("/jobs?" + params);
    const ids = page.items.filter(x => x.app_id).map(x => x.id);
    let etas = {};
    if (ids.length) etas = await api("/job-etas?" + ids.map(i => "job_id=" + encodeURIComponent(i)).join("&"));
    if (!current()) return;
    j.next = page.next_cursor;
    const body = $("job-table").tBodies[0];
    body.textContent = "";
    for (const x of page.items) {
      const tr = document.createElement("tr");
      tr.dataset.job = x.id;
      const e = etas[x.id];
      td(tr, x.id.slice(-12)).title = x.id;
      td(tr, x.name, "text"); td(tr, x.queue, "text"); td(tr, x.state, "text");
      td(tr, when(x.submitted_at)); td(tr, when(x.deadline_at));
      td(tr, e ? when(e.eta) : "–"); td(tr, e ? num(e.progress, 0) + " %" : "–");
      const outcome = x.met_deadline === null ? "" : x.met_deadline ? "met" : "missed";
      td(tr, outcome, x.met_deadline === null ? "" : x.met_deadline ? "ok" : "bad");
      tr.addEventListener("click", () => guard(() => showJob(x.id)));
      body.appendChild(tr);
    }
    pager($("job-pager"), j.page, j.page > 0, !!j.next,
      () => { j.page--; guard(loadJobs); },
      () => { j.cursors[j.page + 1] = j.next; j.page++; guard(loadJobs); });
  }

  async function showJob(id) {
    const current = ticket("job-detail");
    const job = await api("/jobs/" + encodeURIComponent(id));
    if (!current()) return;
    const box = $("job-detail");
    box.textContent = "";
    const h = document.createElement("h3");
    h.textContent = job.name + " (" + job.id + ") — " + job.state + (job.reason ? ": " + job.reason : "");
    box.appendChild(h);
    const table = document.createElement("table");
    table.className = "grid";
    const head = table.createTHead().insertRow();
    for (const c of ["time", "action", "policy", "CPUs", "requested", "fraction", "time to deadline s", "reason"]) {
      const th = document.createElement("th"); th.textContent = c; head.appendChild(th);
    }
    const body = table.createTBody();
    for (const d of job.decisions) {
      const tr = body.insertRow();
      td(tr, when(d.at)); td(tr, d.action, "text"); td(tr, d.policy, "text");
      td(tr, d.cpus); td(tr, d.req_cpus); td(tr, num(d.fraction, 3)); td(tr, num(d.ttd_s, 0));
      td(tr, d.reason, "reason");
    }
    box.appendChild(table);
  }

  // ----- decisions -----------------------------------------------------------------------------
  function resetDecisions() { Object.assign(state.decisions, { cursors: [null], page: 0, next: null }); }

  async function loadDecisions() {
    const d = state.decisions;
    const params = new URLSearchParams({ limit: String(PAGE_DECISIONS) });
    if (d.kind) params.set("kind", d.kind);
    if (d.status) params.set("status", d.status);
    if (d.cursors[d.page]) params.set("cursor", d.cursors[d.page]);
    const current = ticket("decisions");
    const page = await api("/decisions?" + params);
    if (!current()) return;
    d.next = page.next_cursor;
    const body = $("decision-table").tBodies[0];
    body.textContent = "";
    for (const x of page.items) {
      const tr = document.createElement("tr");
      tr.dataset.decision = String(x.id);
      td(tr, x.id); td(tr, when(x.created_at)); td(tr, x.kind, "text"); td(tr, x.policy, "text");
      td(tr, x.mode, "text"); td(tr, x.status, "text"); td(tr, x.reason, "reason");
      tr.addEventListener("click", () => guard(() => showDecision(x.id)));
      body.appendChild(tr);
    }
    pager($("decision-pager"), d.page, d.page > 0, !!d.next,
      () => { d.page--; guard(loadDecisions); },
      () => { d.cursors[d.page + 1] = d.next; d.page++; guard(loadDecisions); });
  }

  function kvList(pairs) {
    const dl = document.createElement("dl");
    dl.className = "kv";
    for (const [k, v] of pairs) {
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = v === null || v === undefined ? "–" : String(v);
      dl.append(dt, dd);
    }
    return dl;
  }

  async function showDecision(id) {
    const current = ticket("decision-detail");
    const d = await api("/decisions/" + id);
    if (!current()) return;
    const box = $("decision-detail");
    box.textContent = "";
    const h = document.createElement("h3");
    h.textContent = "Decision " + d.id + ": " + d.kind + " · " + d.status;
    box.appendChild(h);
    box.appendChild(kvList([["time", when(d.created_at)], ["policy", d.policy], ["mode", d.mode], ["reason", d.reason]]));
    const plan = (d.outputs || {}).plan;
    if (plan && plan.queues) {
      const inputs = ((d.inputs || {}).policy_inputs || {}).queues || {};
      const details = ((d.outputs || {}).policy || {}).details || {};
      const weights = details.weights || {};
      const p = document.createElement("p");
      p.textContent = "Plan: " + plan.reason + (plan.push ? " (push)" : " (no push)") +
        "; cluster " + num((((d.inputs || {}).policy_inputs || {}).cluster || {}).vcores, 0) + " vcores";
      box.appendChild(p);
      const table = document.createElement("table");
      table.className = "grid explain";
      const head = table.createTHead().insertRow();
      for (const c of ["queue", "measured share", "pending containers", "weight", "policy share", "live %", "target %", "bounded %", "planned %", "why"]) {
        const th = document.createElement("th"); th.textContent = c; head.appendChild(th);
      }
      const body = table.createTBody();
      for (const [q, line] of Object.entries(plan.queues)) {
        const tr = body.insertRow();
        const inp = inputs[q] || {};
        td(tr, q); td(tr, num(inp.used_fraction, 3)); td(tr, num(inp.pending_containers, 1));
        td(tr, num(weights[q], 3)); td(tr, num(line.share, 4));
        td(tr, line.live_h === undefined ? (line.live || {}).capacity : num(line.live_h / 100));
        td(tr, line.target_h === undefined ? "–" : num(line.target_h / 100));
        td(tr, line.bounded_h === undefined ? "–" : num(line.bounded_h / 100));
        td(tr, line.planned_h === undefined ? (line.planned || {}).capacity : num(line.planned_h / 100));
        td(tr, (line.reasons || []).join("; "), "reason");
      }
      box.appendChild(table);
      const push = (d.outputs || {}).push;
      if (push) box.appendChild(kvList([["push", push.status], ["RM said", push.message]]));
    }
    if (d.kind === "policy") {
      box.appendChild(kvList([["changes", JSON.stringify((d.inputs || {}).changes)], ["new configuration", JSON.stringify(((d.outputs || {}).config || {}))]]));
    }
    const raw = document.createElement("details");
    const sum = document.createElement("summary"); sum.textContent = "inputs and outputs (JSON)";
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify({ params: d.params, inputs: d.inputs, outputs: d.outputs, rm_response: d.rm_response }, null, 2);
    raw.append(sum, pre);
    box.appendChild(raw);
  }

  // ----- policy --------------------------------------------------------------------------------
  async function loadPolicy() {
    const p = await api("/policy");
    const dl = $("policy-current");
    dl.replaceWith(Object.assign(kvList([
      ["policy", p.policy], ["mode", p.mode], ["source", p.source], ["parameters", JSON.stringify(p.params)],
      ["max step (pp)", p.max_step_pp], ["min change (pp)", p.min_change_pp],
    ]), { id: "policy-current" }));
    $("policy-mode").value = p.mode;
    $("policy-name").value = p.policy;
    $("policy-name").dataset.current = p.policy;
  }

  async function applyPolicy(ev) {
    ev.preventDefault();
    const body = { mode: $("policy-mode").value };
    const name = $("policy-name").value.trim();
    if (name && name !== $("policy-name").dataset.current) body.policy = name;
    const raw = $("policy-params").value.trim();
    if (raw) {
      try { body.params = JSON.parse(raw); } catch (e) { throw new Error("params: not valid JSON (" + e.message + ")"); }
    }
    const out = await api("/policy", { method: "PUT", body });
    $("policy-result").textContent = "applied: " + out.policy + " · " + out.mode;
    await loadOverview();
    await loadPolicy();
  }

  // ----- what-if -------------------------------------------------------------------------------
  async function loadWhatif() {
    const sel = $("whatif-policy");
    if (!sel.options.length) {
      const names = await api("/whatif/policies");
      for (const n of names.policies) {
        const o = document.createElement("option"); o.value = n; o.textContent = n; sel.appendChild(o);
      }
      sel.value = names.policies.includes("ltrf") ? "ltrf" : names.policies[0];
    }
    const runs = await api("/whatif");
    const ul = $("whatif-runs");
    ul.textContent = "";
    for (const r of runs.items) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = "#whatif";
      a.textContent = when(r.created_at) + " " + r.policy + " — " + r.status;
      a.addEventListener("click", e => { e.preventDefault(); guard(() => watchRun(r.id)); });
      li.appendChild(a);
      ul.appendChild(li);
    }
  }

  async function startWhatif(ev) {
    ev.preventDefault();
    const since = $("whatif-since").value;
    const run = await api("/whatif", { method: "POST", body: { policy: $("whatif-policy").value, since: since || null } });
    await watchRun(run.id);
  }

  async function watchRun(id) {
    clearTimeout(state.whatif.timer);
    const run = await api("/whatif/" + id);
    $("whatif-progress").hidden = run.status === "done";
    $("whatif-bar").value = run.progress;
    $("whatif-phase").textContent = run.phase + " (" + Math.round(run.progress * 100) + " %)";
    if (run.status === "queued" || run.status === "running") {
      state.whatif.timer = setTimeout(() => guard(() => watchRun(id)), 400);
      return;
    }
    if (run.status === "failed") throw new Error("what-if failed: " + run.error);
    renderWhatif(run);
    await loadWhatif();
  }

  function renderWhatif(run) {
    const r = run.result;
    const box = $("whatif-result");
    box.textContent = "";
    box.dataset.run = run.id;
    const h = document.createElement("h3");
    h.textContent = "Replay under " + r.policy + ": " + r.jobs + " jobs on " + r.capacity_vcores + " vcores";
    box.appendChild(h);
    const table = document.createElement("table");
    table.className = "grid";
    table.id = "whatif-summary";
    const head = table.createTHead().insertRow();
    for (const c of ["", "actual", "replay"]) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); }
    const body = table.createTBody();
    const rows = [
      ["mean slowdown", r.actual.overall_slowdown, r.replay.overall_slowdown, 3],
      ["deadlines met", r.actual.deadlines_met, r.replay.deadlines_met, 0],
      ["deadlines missed", r.actual.deadlines_missed, r.replay.deadlines_missed, 0],
      ["utilization", r.actual.utilization, r.replay.utilization, 3],
    ];
    for (const [k, a, b, dg] of rows) { const tr = body.insertRow(); td(tr, k); td(tr, num(a, dg)); td(tr, num(b, dg)); }
    for (const q of r.queues) { const tr = body.insertRow(); tr.dataset.queue = q.queue; td(tr, "slowdown " + q.queue); td(tr, num(q.actual_slowdown, 3)); td(tr, num(q.replay_slowdown, 3)); }
    box.appendChild(table);
    const btn = document.createElement("button");
    btn.id = "whatif-download";
    btn.textContent = "Download HTML report";
    btn.addEventListener("click", () => guard(async () => {
      const resp = await api(run.report_url, { raw: true });
      const url = URL.createObjectURL(await resp.blob());
      const a = document.createElement("a");
      a.href = url; a.download = "whatif-" + run.id + ".html";
      document.body.appendChild(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    }));
    box.appendChild(btn);
  }

  // ----- wiring --------------------------------------------------------------------------------
  function init() {
    const token = $("token");
    token.value = sessionStorage.getItem(TOKEN_KEY) || "";
    token.addEventListener("change", () => {
      if (token.value) sessionStorage.setItem(TOKEN_KEY, token.value); else sessionStorage.removeItem(TOKEN_KEY);
      route();
    });
    $("queue-filter").addEventListener("input", e => { state.queues.filter = e.target.value; state.queues.page = 0; guard(loadQueues); });
    $("queue-leaves").addEventListener("change", e => { state.queues.leaves = e.target.checked; state.queues.page = 0; guard(loadQueues); });
    $("queue-window").addEventListener("change", e => { state.queues.hours = Number(e.target.value); guard(loadQueueCharts); });
    $("job-queue").addEventListener("change", e => { state.jobs.queue = e.target.value.trim(); resetJobs(); guard(loadJobs); });
    $("decision-kind").addEventListener("change", e => { state.decisions.kind = e.target.value; resetDecisions(); guard(loadDecisions); });
    $("decision-status").addEventListener("change", e => { state.decisions.status = e.target.value.trim(); resetDecisions(); guard(loadDecisions); });
    $("policy-form").addEventListener("submit", e => guard(() => applyPolicy(e)));
    $("whatif-form").addEventListener("submit", e => guard(() => startWhatif(e)));
    window.addEventListener("hashchange", route);
    route();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
