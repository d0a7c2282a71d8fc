// System: worker processes and poll workers, the failover buffer, retention history and
// the maintenance switches (admin role).
import { API, get, post } from "../api.js";
import { optional } from "../analytics.js";
import { h, fill } from "../dom.js";
import { ago, bytesKb, duration, json, num } from "../format.js";
import {
  actionButton, badge, codeBlock, confirmed, empty, explain, kv, load, panel, table, toast,
} from "../ui.js";

const SWITCHES = [
  {
    key: "maintenanceMode", path: "/system/maintenance", title: "Push maintenance",
    text: "Every push is written to the failover buffer instead of the database; the buffer is replayed when it is switched off.",
  },
  {
    key: "popMaintenanceMode", path: "/system/maintenance/pop", title: "Pop maintenance",
    text: "Every pop answers 204 (no messages) at once; consumers idle.",
  },
];

function maintenanceView(state, error, refresh) {
  const rows = SWITCHES.map((s) => {
    const on = state ? state[s.key] : null;
    const toggle = (enabled) => actionButton(enabled ? "Switch on" : "Switch off", async () => {
      await confirmed({
        title: `${s.title} ${enabled ? "on" : "off"}?`, body: h("p", s.text),
        confirmLabel: enabled ? "Switch on" : "Switch off", danger: enabled,
      });
      const r = await post(`${API}${s.path}`, { enabled });
      toast(r.message || `${s.title} ${enabled ? "on" : "off"}`);
      await refresh();
    }, { kind: enabled ? "danger" : "", what: "maintenance mode (admin role)" });
    return h("div.switch-row", { dataset: { switch: s.key } },
      h("div.what", h("strong", s.title), h("small", s.text)),
      on === null ? badge("unknown") : badge(on ? "ON" : "off", on ? "bad" : "ok"),
      on === true ? null : toggle(true), on === false ? null : toggle(false));
  });
  return [
    error ? h("p.notice.error#maintenance-error", { role: "alert" }, explain(error, "maintenance mode")) : null,
    rows,
    state ? h("p.muted", `${num(state.bufferedMessages)} message(s) in the failover buffer; buffer `,
      state.bufferHealthy ? "healthy." : "NOT healthy: see below.") : null,
  ];
}

function processView(m) {
  const reg = m.longPolling.registry;
  const db = m.database;
  return [
    kv([
      ["Worker process", `pid ${m.worker.pid} · up ${duration(m.uptime)}`],
      ["Requests", `${num(m.requests.total)} answered · ${num(m.requests.rate)}/s over the last minute`],
      ["Database pool", `${num(db.inUse)} in use of ${num(db.poolSize)} · ${num(db.waitingRequests)} waiting`],
      ["Long polls waiting", `${num(reg.intentions)} in ${num(reg.groups)} group(s) · capacity ${num(reg.capacity)}`],
      ["Poll workers", `${num(m.longPolling.workers.length)} · groups per worker: ${reg.groups_per_shard.join(", ")}`],
      ["Wake-up listener", m.wakeupListener.connected ? badge("connected", "ok") : badge("not connected", "warn")],
      kvRow(m.kv),
      locksRow(m.kv),
      ["Memory", bytesKb(m.memory.maxRssKb)],
      ["CPU time", `${m.cpu.user} s user · ${m.cpu.system} s system`],
    ]),
    h("details", h("summary", "Every number of this process (GET /metrics)"), codeBlock(json(m))),
  ];
}

// Key/value and locks (docs/kv.md): database-wide numbers, this process's acquires.
function kvRow(k) {
  if (!k || k.error) return null;
  return ["Key/value", `${num(k.keys)} live keys · ${num(k.expiredPending)} expired waiting for the sweeper · ${num(k.expiredTotal)} swept`];
}

function locksRow(k) {
  if (!k || k.error || !k.lockAcquires) return null;
  const a = k.lockAcquires;
  return ["Locks", `${num(k.lockPermits)} permits held · here: ${num(a.grant)} granted, ${num(a.takeover)} taken over, ${num(a.refusal)} refused`];
}

function workersView(body) {
  const rows = body.workers.map((w) => ({ ...w, last: w.series[w.series.length - 1] || {} }));
  return table({
    rowKey: (w) => `${w.hostname}:${w.port}:${w.workerId}`,
    columns: [
      { key: "host", label: "Instance", render: (w) => `${w.hostname}:${w.port}` },
      { key: "workerId", label: "Worker" },
      { key: "cpu", label: "CPU", num: true, render: (w) => `${num(w.last.cpuPercent)} %` },
      { key: "rss", label: "Memory", num: true, render: (w) => bytesKb((w.last.rssBytes || 0) / 1024) },
      { key: "pool", label: "DB pool", num: true, render: (w) => `${num(w.last.dbPoolInUse)} / ${num(w.last.dbPoolSize)}` },
      { key: "polls", label: "Long polls", num: true, render: (w) => w.last.longPollsWaiting },
      { key: "lastSeen", label: "Last seen", render: (w) => ago(w.lastSeen) },
    ],
    rows,
  });
}

function bufferView(b) {
  return [
    kv([
      ["Waiting to replay", num(b.pending)],
      ["Failed", b.failed ? badge(num(b.failed), "bad") : "0"],
      ["Database (this process)", b.dbHealthy ? badge("reachable", "ok") : badge("unreachable", "bad")],
      ["Replayer", b.replayerPid ? `pid ${b.replayerPid}` : "none"],
      ["Folder", h("span.mono", `${b.directory}${b.writable ? "" : " (not writable!)"}`)],
      b.lastError ? ["Last error", b.lastError] : null,
    ]),
    b.files.length
      ? h("div.gap", table({ columns: [{ key: "name", label: "File", cls: "mono" }, { key: "state", label: "State" }, { key: "events", label: "Events", num: true }], rows: b.files }))
      : h("p.muted", "No buffer files: every push reached the database."),
  ];
}

function retentionView(overview) {
  const services = Object.entries(overview.retention.services || {});
  return [
    h("p", `${num(overview.retention.deletedLast24h)} message(s) and ${num(overview.retention.partitionsDeletedLast24h)} `,
      "idle partition(s) deleted in the last 24 hours."),
    services.length
      ? table({
        rowKey: ([name]) => name,
        columns: [
          { key: "service", label: "Service", render: ([name]) => name },
          { key: "runs", label: "Runs", num: true, render: ([, s]) => s.runs },
          { key: "finishedAt", label: "Last run", render: ([, s]) => ago(s.finishedAt || s.startedAt) },
          { key: "result", label: "Result", cls: "wrap", render: ([, s]) => (s.error ? badge(s.error, "bad") : json(s.result)) },
        ],
        rows: services,
      })
      : empty("No background run yet", "Retention and eviction run every few minutes."),
  ];
}

export async function mount(view) {
  const maintenance = panel("Maintenance mode", { id: "maintenance" });
  const proc = panel("This server process", { id: "process" });
  const workers = panel("Worker processes (every instance)", { id: "workers", flush: true });
  const buffer = panel("Failover buffer (this host)", { id: "buffer" });
  const retention = panel("Retention and eviction", { id: "retention" });
  fill(view.el,
    h("div.page-head", h("h1", "System"), h("span.spacer"), h("span.muted", "Switches need the admin role")),
    h("div.grid.two", maintenance.el, proc.el), h("div.gap", workers.el),
    h("div.grid.two.gap", buffer.el, retention.el));

  return async function refresh() {
    await Promise.all([
      (async () => {
        let state = null;
        let error = null;
        try {
          state = await get(`${API}/system/maintenance`);
        } catch (err) {
          error = err;
        }
        fill(maintenance.body, maintenanceView(state, error, () => view.refresh()));
      })(),
      load(proc.body, async () => processView(await get("/metrics")), "the process's numbers"),
      load(workers.body, async () => {
        const body = await optional(`${API}/analytics/worker-metrics`, { from: new Date(Date.now() - 300000).toISOString() });
        if (!body) return h("p.muted.panel-body", "Analytics not available yet: this server has no per-process history ",
          "(GET /api/v1/analytics/worker-metrics answers 404). The panel above shows the process that answered.");
        if (!body.workers.length) return empty("No process reported in the last 5 minutes", "Processes write their numbers once a minute.");
        return workersView(body);
      }, "the worker processes"),
      load(buffer.body, async () => bufferView(await get(`${API}/status/buffers`)), "the failover buffer"),
      load(retention.body, async () => retentionView(await get(`${API}/resources/overview`)), "the retention history"),
    ]);
  };
}
