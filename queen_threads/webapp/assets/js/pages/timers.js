// Timers: messages scheduled for later (docs/timers.md). Totals and the last hour's fires
// (GET /metrics), the queues with pending timers, the soonest first, and one queue's
// pending timers (GET /api/v1/timers/{queue}, a keyset page), each with when it is due.
import { API, get, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, num, time } from "../format.js";
import { badge, empty, load, panel, stat, table } from "../ui.js";

const PAGE_SIZE = 100;

const CURL_SCHEDULE = () => `curl -X POST ${location.origin}/api/v1/timers -H 'Content-Type: application/json' \\\n` +
  `  -d '{"operations": [{"op": "schedule", "queue": "orders", "timerKey": "order:9f1:expire",\n` +
  `        "payload": "'$(printf '{"orderId":"9f1"}' | base64 -w0)'", "delayMs": 60000}]}'`;

function dueView(iso, attempts) {
  if (!iso) return "–";
  const overdue = Date.parse(iso) <= Date.now();
  return h("span", { title: time(iso) }, ago(iso), " ",
    attempts > 0 ? badge(`retry ${num(attempts)}`, "bad") : overdue ? badge("due", "warn") : null);
}

function ms(value) {
  return value === null || value === undefined ? "–" : `${num(value)} ms`;
}

export async function mount(view) {
  let queue = view.params.get("queue") || "";
  const totals = h("div.stats", { id: "timer-stats" });
  const queues = panel("Queues with pending timers", { id: "timer-queues", flush: true });
  const detail = panel(queue ? `Pending timers of ${queue}` : "A queue's pending timers",
    { id: "timer-list", flush: true });
  fill(view.el,
    h("div.page-head", h("h1", "Timers"),
      h("p", "Messages scheduled for later: each fires once, on time, as a message of its queue.")),
    totals, h("div.grid.two", queues.el, detail.el));

  return async function refresh() {
    detail.head.querySelector("h2").textContent = queue ? `Pending timers of ${queue}` : "A queue's pending timers";
    let database = {};
    await load(totals, async () => {
      database = ((await get("/metrics")).timers || {}).database || {};
      return [
        stat("Pending", num(database.pending)),
        stat("Due now", num(database.due), "past their time, not fired yet"),
        stat("Fired (1 h)", num(database.fired)),
        stat("Late > 50 ms (1 h)", num(database.late)),
        stat("Lateness p50 / p99", `${ms(database.lateP50Ms)} / ${ms(database.lateP99Ms)}`, "last hour"),
      ];
    }, "the timers' numbers");
    await Promise.all([
      load(queues.body, async () => {
        const rows = database.queues || [];
        if (!rows.length) return empty("No pending timers", "Schedule one like this:", CURL_SCHEDULE());
        return table({
          rowKey: (r) => r.queue,
          selected: queue,
          onRow: (r) => { queue = r.queue; view.set({ queue }, { push: true }); view.refresh(); },
          columns: [
            { key: "queue", label: "Queue", render: (r) => h("a", { href: `/timers?queue=${seg(r.queue)}` }, r.queue) },
            { key: "pending", label: "Pending", num: true },
            { key: "due", label: "Due now", num: true },
            { key: "nextAt", label: "Next", render: (r) => dueView(r.nextAt, 0) },
          ],
          rows,
        });
      }, "the queues with timers"),
      load(detail.body, async () => {
        if (!queue) return h("p.muted.panel-body", "Pick a queue to list its pending timers.");
        const page = await get(`${API}/timers/${seg(queue)}`, { limit: PAGE_SIZE });
        if (!page.rows.length) return empty(`No pending timer in ${queue}`, "Fired and cancelled timers leave no row.");
        return table({
          rowKey: (t) => t.timerKey,
          columns: [
            { key: "timerKey", label: "Key", cls: "mono wrap" },
            { key: "deliverAt", label: "Due", render: (t) => dueView(t.nextAttemptAt || t.deliverAt, t.attempts) },
            { key: "partition", label: "Partition", cls: "hide-sm" },
            { key: "messageId", label: "Message id", cls: "mono hide-sm", num: true },
            { key: "lastError", label: "Last error", cls: "wrap hide-sm", render: (t) => t.lastError || "–" },
          ],
          rows: page.rows,
          caption: page.truncated ? `The first ${PAGE_SIZE} by key` : undefined,
        });
      }, "this queue's timers"),
    ]);
  };
}
