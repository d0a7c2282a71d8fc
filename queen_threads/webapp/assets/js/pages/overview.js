// Overview: message flow per minute, totals, the deepest backlogs, health.
import { API, get } from "../api.js";
import { flow, optional, RANGES } from "../analytics.js";
import { seriesChart } from "../charts.js";
import { h, fill } from "../dom.js";
import { ago, duration, num, secondsSince } from "../format.js";
import {
  badge, curlPush, empty, kv, load, panel, segmented, stat, table,
} from "../ui.js";
import { queuePicker } from "./parts.js";

const NO_ANALYTICS = "Analytics not available yet: this server has no per-minute analytics " +
  "(GET /api/v1/status/analytics answers 404).";

const CHARTS = [
  { id: "pushed", title: "Pushed", series: [{ label: "pushed", color: "--series-1" }], keys: ["pushed"] },
  { id: "delivered", title: "Delivered", series: [{ label: "delivered", color: "--series-2" }], keys: ["popped"] },
  { id: "acked", title: "Acknowledged", series: [{ label: "acked", color: "--series-3" }], keys: ["acked"] },
  {
    id: "failed", title: "Failed",
    series: [{ label: "failed (retried)", color: "--series-5" }, { label: "dead-lettered", color: "--series-4" }],
    keys: ["failed", "dlq"],
  },
];

function backlogTable(queues) {
  const deepest = [...queues]
    .sort((a, b) => b.messages.pending - a.messages.pending || a.name.localeCompare(b.name))
    .slice(0, 8);
  return table({
    rowKey: (q) => q.name,
    columns: [
      { key: "name", label: "Queue", render: (q) => h("a", { href: `/queues?queue=${encodeURIComponent(q.name)}` }, q.name) },
      { key: "pending", label: "Waiting", num: true, render: (q) => q.messages.pending },
      { key: "processing", label: "In flight", num: true, render: (q) => q.messages.processing },
      { key: "oldest", label: "Oldest waiting", render: (q) => (q.messages.oldestPendingAt ? duration(secondsSince(q.messages.oldestPendingAt)) : "–") },
      { key: "dlq", label: "Dead letters", num: true, cls: "hide-sm", render: (q) => q.messages.deadLettered },
    ],
    rows: deepest,
  });
}

function healthView(health, overview) {
  const ok = health.status === "healthy";
  return kv([
    ["Server", badge(ok ? "healthy" : health.status, ok ? "ok" : "bad")],
    ["Database", badge(health.database, health.database === "connected" ? "ok" : "bad")],
    health.error ? ["Error", health.error] : null,
    ["Schema", health.schema],
    ["Version", health.version],
    ["Answered by", `${health.server} · worker ${health.worker_id}`],
    ["Last push", overview ? ago(overview.lastPushAt) : "–"],
    ["Retention, last 24 h", overview ? `${num(overview.retention.deletedLast24h)} messages deleted` : "–"],
  ]);
}

export async function mount(view) {
  let range = view.params.get("range") || "1h";
  let queue = view.params.get("queue") || "";
  const stats = h("div.stats#totals");
  const queuePick = h("span");
  const head = h("div.page-head", h("h1", "Overview"), h("span.spacer"), queuePick,
    segmented(RANGES.map(([k, label]) => [k, label]), range, (value) => {
      range = value;
      view.set({ range: value === "1h" ? "" : value });
      view.refresh();
    }, "Time range"));
  const chartGrid = h("div.grid.two#charts");
  const charts = CHARTS.map((c) => {
    const p = panel(c.title, { id: `panel-${c.id}` });
    const box = h("div", { id: `chart-${c.id}` });
    p.body.append(box);
    chartGrid.append(p.el);
    return { ...c, chart: seriesChart(box, { label: c.title, series: c.series }) };
  });
  view.cleanup(() => charts.forEach((c) => c.chart.destroy()));
  const note = h("p.muted#flow-source");
  const backlog = panel("Deepest backlogs", { id: "backlog" });
  const health = panel("Health", { id: "health" });
  fill(view.el, head, stats, chartGrid, note, h("div.grid.two", backlog.el, health.el));

  async function drawFlow() {
    const data = await flow({ range, queue });
    for (const c of charts) {
      const columns = c.keys.map((k) => data[k]);
      if (columns.some((col) => col === null)) c.chart.unavailable(NO_ANALYTICS);
      else c.chart.update(data.xs, columns);
    }
    const per = data.step >= 3600 ? `${data.step / 3600} h` : `${data.step / 60} min`;
    note.textContent = `${queue ? `Queue ${queue}` : "All queues"}, one point per ${per}` +
      (data.source === "status" ? " (pushed from GET /api/v1/status; per-minute analytics not available yet)." : ".");
    return data;
  }

  async function totals(overviewRequest) {
    const [overview, waiting] = await Promise.all([
      overviewRequest, longPollsWaiting().catch(() => null),
    ]);
    const m = overview.messages;
    return [
      stat("Queues", num(overview.queues), `${num(overview.partitions)} partitions`),
      stat("Waiting", num(m.pending), "not delivered yet"),
      stat("In flight", num(m.processing), `${num(overview.leases.active)} active leases`),
      stat("Dead letters", num(m.deadLettered), h("a", { href: "/dlq" }, "open the DLQ")),
      stat("Consumer groups", num(overview.consumerGroups), h("a", { href: "/groups" }, "see their lag")),
      stat("Oldest waiting", m.oldestPendingAt ? duration(secondsSince(m.oldestPendingAt)) : "–",
        m.oldestPendingAt ? `since ${new Date(m.oldestPendingAt).toLocaleTimeString()}` : "nothing waits"),
      stat("Long polls waiting", waiting === null ? "–" : num(waiting), "consumers waiting for messages"),
    ];
  }

  async function longPollsWaiting() {
    const system = await optional(`${API}/analytics/system-metrics`, { from: new Date(Date.now() - 120000).toISOString() });
    const points = system && system.series ? system.series.filter((p) => p.processes) : [];
    if (points.length) return points[points.length - 1].longPollsWaiting;
    const metrics = await get("/metrics"); // the answering worker process only
    return metrics.longPolling.registry.intentions;
  }

  return async function refresh() {
    let queues = [];
    const overview = get(`${API}/resources/overview`);
    overview.catch(() => {}); // each panel shows the error itself
    await Promise.all([
      load(backlog.body, async () => {
        queues = (await get(`${API}/status/queues`, { limit: 1000 })).queues;
        await queuePicker(queuePick, queue, (value) => {
          queue = value;
          view.set({ queue: value });
          view.refresh();
        }, queues.map((q) => q.name));
        if (!queues.length) {
          return empty("No queues yet", "Push a message and its queue appears here:", curlPush());
        }
        return backlogTable(queues);
      }, "the queues"),
      load(stats, () => totals(overview), "the totals"),
      load(health.body, async () => {
        const status = await get("/health", {}, { accept: [503] });
        return healthView(status, await overview.catch(() => null));
      }, "the server's health"),
      drawFlow().catch((err) => {
        for (const c of charts) c.chart.unavailable(err.message);
      }),
    ]);
  };
}
