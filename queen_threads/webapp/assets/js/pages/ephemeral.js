// Ephemeral queues: bounded rings that may lose their contents (docs/ephemeral.md). Totals
// of the database (GET /metrics), every queue with its depth, bytes and drops
// (GET /api/v1/ephemeral/queues), and one queue's options and groups
// (GET /api/v1/ephemeral/queues/{queue}/depth).
import { API, get, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { num } from "../format.js";
import { badge, empty, kv, load, panel, stat, table } from "../ui.js";

const CURL_PUSH = () => `curl -X POST ${location.origin}/api/v1/ephemeral/push -H 'Content-Type: application/json' \\\n` +
  `  -d '{"queue": "presence", "messages": [{"payload": {"user": "a", "typing": true}}]}'`;

function bytes(value) {
  if (value === null || value === undefined) return "–";
  return value >= 1048576 ? `${(value / 1048576).toFixed(1)} MiB` : value >= 1024 ? `${(value / 1024).toFixed(1)} KiB` : `${num(value)} B`;
}

export async function mount(view) {
  let queue = view.params.get("queue") || "";
  const totals = h("div.stats", { id: "ephemeral-stats" });
  const queues = panel("Ephemeral queues", { id: "ephemeral-queues", flush: true });
  const detail = panel(queue ? `Groups of ${queue}` : "A queue's groups", { id: "ephemeral-detail", flush: true });
  fill(view.el,
    h("div.page-head", h("h1", "Ephemeral"),
      h("p", "Bounded queues whose contents may be lost (a PostgreSQL crash empties them); their configuration is kept.")),
    totals, h("div.grid.two", queues.el, detail.el));

  return async function refresh() {
    detail.head.querySelector("h2").textContent = queue ? `Groups of ${queue}` : "A queue's groups";
    await load(totals, async () => {
      const e = (await get("/metrics")).ephemeral || {};
      return [
        stat("Queues", num(e.queues)),
        stat("Messages held", num(e.depth), "in every ring, history included"),
        stat("Bytes held", bytes(e.bytes)),
        stat("Dropped", num(e.dropped), "bounds, ttl, retry limit"),
        stat("In flight", num(e.inFlight), "handed out, not acked"),
      ];
    }, "the ephemeral queues' numbers");
    await Promise.all([
      load(queues.body, async () => {
        const rows = (await get(`${API}/ephemeral/queues`)).queues || [];
        if (!rows.length) return empty("No ephemeral queues yet", "Push to one and it exists:", CURL_PUSH());
        return table({
          rowKey: (r) => r.queue,
          selected: queue,
          onRow: (r) => { queue = r.queue; view.set({ queue }, { push: true }); view.refresh(); },
          columns: [
            { key: "queue", label: "Queue", render: (r) => h("a", { href: `/ephemeral?queue=${seg(r.queue)}` }, r.queue, " ",
              r.declared ? null : badge("implicit")) },
            { key: "depth", label: "Held", num: true },
            { key: "bytes", label: "Bytes", num: true, render: (r) => bytes(r.bytes), cls: "hide-sm" },
            { key: "inFlight", label: "In flight", num: true, cls: "hide-sm" },
            { key: "dropped", label: "Dropped", num: true, render: (r) => r.dropped ? badge(num(r.dropped), "warn") : "0" },
          ],
          rows,
        });
      }, "the ephemeral queues"),
      load(detail.body, async () => {
        if (!queue) return h("p.muted.panel-body", "Pick a queue to see its options and groups.");
        const d = await get(`${API}/ephemeral/queues/${seg(queue)}/depth`);
        const o = d.options || {};
        const groups = [];
        for (const g of d.groups || []) {
          for (const p of g.partitions) groups.push({ group: g.group, ...p, inFlight: g.inFlight });
        }
        return h("div",
          h("div.panel-body", kv([
            ["Bounds", `${num(o.maxLength)} messages, ${bytes(o.maxBytes)}, policy ${o.policy || "–"}`],
            ["Age limit", o.ttlSeconds ? `${num(o.ttlSeconds)} s` : "none"],
            ["Lease, retries", `${num(o.leaseSeconds)} s, ${num(o.retryLimit)}`],
          ])),
          groups.length ? table({
            rowKey: (r) => `${r.group}\u0000${r.partition}`,
            columns: [
              { key: "group", label: "Group", cls: "wrap" },
              { key: "partition", label: "Partition", cls: "wrap" },
              { key: "pending", label: "Not read", num: true },
              { key: "inFlight", label: "In flight", num: true, cls: "hide-sm" },
            ],
            rows: groups,
          }) : h("p.muted.panel-body", "No group has popped yet."));
      }, "this queue's groups"),
    ]);
  };
}
