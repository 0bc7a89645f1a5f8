// The scidmz live dashboard: polls the daemon's token-protected JSON API once per period
// and draws the last minutes with uPlot (vendored, MIT); no network access beyond the daemon.
"use strict";
(function () {
  const KEEP_S = 300;  // seconds of history on the charts (ours: "the last minutes")
  const state = { token: null, since: 0, rows: [], period: 1, timer: null, charts: {} };
  window.scidmz = state;  // for tests and the curious: state.rows holds what is drawn

  const $ = (id) => document.getElementById(id);
  const fmtRate = (v) => v == null ? "-" : v >= 1e9 ? (v / 1e9).toFixed(2) + " Gbit/s"
    : v >= 1e6 ? (v / 1e6).toFixed(1) + " Mbit/s" : v >= 1e3 ? (v / 1e3).toFixed(1) + " kbit/s" : v.toFixed(0) + " bit/s";

  async function api(path, opts) {
    const o = Object.assign({ headers: {} }, opts || {});
    o.headers["Authorization"] = "Bearer " + state.token;
    const r = await fetch(path, o);
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    return { code: r.status, body: body };
  }

  function chart(el, title, series, yfmt) {
    const w = Math.max(400, Math.min(1100, window.innerWidth - 80));
    const opts = {
      width: w, height: 220, title: title,
      scales: { x: { time: true } },
      series: [{}].concat(series),
      axes: [{}, { values: (u, vals) => vals.map(yfmt), size: 80 }],
    };
    return new uPlot(opts, [[]].concat(series.map(() => [])), el);
  }

  function ms(v) { return v == null ? "-" : (v * 1e3).toFixed(1) + " ms"; }

  function redraw() {
    const rows = state.rows;
    const x = rows.map((r) => r.time);
    const y = (f) => rows.map((r) => (r.y ? r.y[f] : null));
    state.charts.rates.setData([x, y("rate_dtn"), rows.map((r) => r.u), rows.map((r) => r.target), y("rate_campus")]);
    state.charts.delays.setData([x, y("rtt_dtn"), y("rtt_campus"), y("qdelay_dtn"), y("qdelay_campus")]);
  }

  async function poll() {
    try {
      const h = await api("/history?since=" + state.since);
      if (h.code === 401) { return refused(h.body); }
      if (h.code === 200) {
        for (const p of h.body.periods) { state.rows.push(p); state.since = Math.max(state.since, p.k); }
        state.period = h.body.period;
        const cut = Date.now() / 1000 - KEEP_S;
        while (state.rows.length && state.rows[0].time < cut) state.rows.shift();
        redraw();
      }
      const s = await api("/status");
      if (s.code === 200) show(s.body);
    } catch (e) {
      $("meta").textContent = "daemon unreachable: " + e;
    }
    state.timer = setTimeout(poll, Math.max(200, Math.min(2000, state.period * 1000)));
  }

  function show(st) {
    $("v-target").textContent = fmtRate(st.target);
    $("v-dtn").textContent = st.y ? fmtRate(st.y.rate_dtn) : "-";
    $("v-u").textContent = fmtRate(st.u);
    // Shadow mode: the loop runs and decides, nothing is applied (u is what it would apply).
    const shadow = st.mode === "shadow";
    $("mode").hidden = !shadow;
    $("mode").textContent = shadow ? "shadow: nothing applied" : "";
    $("u-label").textContent = shadow ? "campus limit u (would apply)" : "campus limit u";
    $("v-k").textContent = String(st.k);
    $("v-fallback").textContent = st.fallback ? "ON" : "off";
    $("v-reason").textContent = st.fallback ? (st.fallback_reason || "") : "";
    $("fallback-card").classList.toggle("on", !!st.fallback);
    $("where").textContent = st.policy + " on " + st.plant + " (" + st.scenario + "), T = " + st.period + " s";
    const errs = Object.entries(st.errors || {}).map(([k, v]) => k + " " + v).join(", ");
    // The host place on real equipment: each DTN agent, answering or not (the host_agent fallback cause).
    const agents = (st.host_agents || []).map((a) => a.url + (a.error ? " UNREACHABLE" : " ok")).join(", ");
    $("meta").textContent = "faults by cause: " + (errs || "none") + "; fallback periods " + st.fallback_periods
      + (agents ? "; DTN agents: " + agents : "");
  }

  function refused(body) {
    if (state.timer) clearTimeout(state.timer);
    $("main").hidden = true;
    $("auth-error").hidden = false;
    $("auth-error").textContent = "refused: " + ((body && body.error) || "wrong token");
    sessionStorage.removeItem("scidmz-token");
  }

  async function connect(token) {
    state.token = token;
    const s = await api("/status");
    if (s.code !== 200) { return refused(s.body); }
    sessionStorage.setItem("scidmz-token", token);
    $("auth-error").hidden = true;
    $("login").hidden = true;
    $("main").hidden = false;
    if (!state.charts.rates) {
      const rate = (v) => fmtRate(v);
      state.charts.rates = chart($("chart-rates"), "bit/s", [
        { label: "DTN rate y", stroke: "#1f77b4", width: 2 },
        { label: "campus limit u", stroke: "#d62728", width: 2 },
        { label: "target", stroke: "#2ca02c", dash: [6, 4], width: 2 },
        { label: "campus rate", stroke: "#ff7f0e", width: 1 },
      ], rate);
      state.charts.delays = chart($("chart-delays"), "seconds", [
        { label: "RTT DTN", stroke: "#1f77b4" }, { label: "RTT campus", stroke: "#ff7f0e" },
        { label: "queue DTN", stroke: "#9467bd" }, { label: "queue campus", stroke: "#8c564b" },
      ], ms);
    }
    show(s.body);
    poll();
  }

  $("token-form").addEventListener("submit", (ev) => { ev.preventDefault(); connect($("token").value.trim()); });
  $("target-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = $("target-input").value.trim();
    const r = await api("/target", { method: "POST", headers: { "Content-Type": "application/json" },
                                     body: JSON.stringify({ target: v }) });
    const msg = $("target-msg");
    if (r.code === 200) { msg.className = ""; msg.textContent = "target set to " + fmtRate(r.body.target); }
    else if (r.code === 401) { refused(r.body); }
    else { msg.className = "error"; msg.textContent = (r.body && r.body.error) || ("HTTP " + r.code); }
  });
  // A token in the URL fragment (#token=...) is never sent to the server in the request line.
  const m = /token=([^&]+)/.exec(location.hash);
  const saved = m ? decodeURIComponent(m[1]) : sessionStorage.getItem("scidmz-token");
  if (m) history.replaceState(null, "", location.pathname);
  if (saved) { $("token").value = saved; connect(saved); }
})();
