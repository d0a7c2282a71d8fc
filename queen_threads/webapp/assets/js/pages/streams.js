// Streams: windowed consumption over queues. Totals, every stream with its window and
// sources, and a stream's detail (definition, each consumer group's keys with their offset,
// last acked window and the window out); delete a stream (admin role). Beside them, the
// queries of the official clients' streaming SDK (/streams/v1) with their state and lag.
import { API, del, get, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, bytesKb, num, time } from "../format.js";
import {
  actionButton, badge, confirmed, empty, kv, load, panel, stat, table, toast,
} from "../ui.js";

const GLOBAL = "__GLOBAL__";

/** Milliseconds as "500 ms", "30 s", "5 min", "2 h", "1 d" (exact when it divides). */
export function ms(value) {
  if (value === null || value === undefined) return "–";
  const n = Number(value);
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["min", 60_000], ["s", 1000]]) {
    if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  }
  return n >= 1000 ? `${num(n / 1000)} s` : `${num(n)} ms`;
}

/** "tumbling 1 min", "sliding 5 min every 1 min", "count 100". */
export function windowText(s) {
  if (s.window_type === "count") return `count ${num(s.window_size_count)}`;
  if (s.window_type === "sliding") return `sliding ${ms(s.window_duration_ms)} every ${ms(s.window_slide_ms)}`;
  return `tumbling ${ms(s.window_duration_ms)}`;
}

const COLUMNS = [
  {
    key: "name", label: "Stream",
    render: (s) => h("a", { href: `/streams?stream=${seg(s.name)}` }, s.name),
  },
  { key: "namespace", label: "Namespace", cls: "hide-sm", render: (s) => s.namespace || "–" },
  { key: "window", label: "Window", render: (s) => windowText(s) },
  { key: "grace", label: "Grace", cls: "hide-sm", render: (s) => (s.window_type === "count" ? "–" : ms(s.window_grace_period_ms)) },
  { key: "sources", label: "Sources", cls: "wrap", render: (s) => s.source_queue_names.join(", ") || "–" },
  { key: "partitioned", label: "Keys", cls: "hide-sm", render: (s) => (s.partitioned ? badge("per partition", "info") : badge("global")) },
  { key: "consumerGroups", label: "Groups", num: true },
  { key: "activeLeases", label: "Leases", num: true },
];

const keyLabel = (c) => (c.key === GLOBAL ? "global (__GLOBAL__)" : `${c.queue || "?"} / ${c.partition || c.key}`);

function leaseView(lease) {
  if (!lease) return "–";
  const when = lease.released
    ? badge("given back, to redeliver", "bad")
    : lease.expired
      ? badge(`expired ${ago(lease.expiresAt)}`, "bad")
      : badge(`until ${time(lease.expiresAt)}`, "warn");
  return h("span", `${time(lease.start)} → ${time(lease.end)} · ${num(lease.messages)} msg`,
    lease.deliveryCount > 1 ? ` · delivery ${num(lease.deliveryCount)}` : "", " ", when);
}

function consumersTable(consumers) {
  if (!consumers.length) {
    return empty("No consumer group reads this stream yet", "A group appears with its first window:",
      `curl -X POST ${location.origin}/api/v1/stream/poll -H 'Content-Type: application/json' \\\n` +
      `  -d '{"streamName": "…", "consumerGroup": "analytics", "timeout": 30000}'`);
  }
  return table({
    rowKey: (c) => `${c.consumerGroup}:${c.key}`,
    columns: [
      { key: "consumerGroup", label: "Group" },
      { key: "key", label: "Key", cls: "wrap", render: (c) => h("span", { dataset: { streamKey: c.key } }, keyLabel(c)) },
      { key: "lease", label: "Window out", cls: "wrap", render: (c) => leaseView(c.lease) },
      { key: "offset", label: "Offset", render: (c) => time(c.offset) },
      {
        key: "lastAcked", label: "Last acked window", cls: "wrap hide-sm",
        render: (c) => (c.lastAckedWindowStart ? `${time(c.lastAckedWindowStart)} → ${time(c.lastAckedWindowEnd)}` : "–"),
      },
      { key: "windowsAcked", label: "Windows acked", num: true },
      { key: "messagesAcked", label: "Messages acked", num: true, cls: "hide-sm" },
      { key: "lastAckedAt", label: "Last ack", cls: "hide-sm", render: (c) => ago(c.lastAckedAt) },
    ],
    rows: consumers,
  });
}

function definition(s) {
  return kv([
    ["Window", windowText(s)],
    s.window_type === "count" ? null : ["Grace period", ms(s.window_grace_period_ms)],
    ["Lease timeout", ms(s.window_lease_timeout_ms)],
    ["Keys", s.partitioned ? "one per source partition" : "one global key over every source"],
    ["Namespace", s.namespace || "–"],
    ["Sources", s.source_queue_names.length
      ? s.source_queue_names.map((q, i) => [i ? ", " : "", h("a", { href: `/queues?queue=${seg(q)}` }, q)])
      : "–"],
    ["Created", time(s.created_at)],
    ["Updated", time(s.updated_at)],
  ]);
}

async function detail(name, close) {
  const [s, c] = await Promise.all([
    get(`${API}/resources/streams/${seg(name)}`),
    get(`${API}/resources/streams/${seg(name)}/consumers`),
  ]);
  const remove = actionButton("Delete stream", async () => {
    await confirmed({
      title: `Delete stream ${name}?`,
      body: h("p", "Its definition goes with every consumer group's offsets and the windows out. The source queues and their messages stay."),
      confirmLabel: "Delete", danger: true,
    });
    await del(`${API}/resources/streams/${seg(name)}`);
    toast(`Deleted stream ${name}`);
    close();
  }, { kind: "danger", what: "deleting a stream (admin role)" });
  const groups = s.consumerGroups || [];
  const defPanel = panel("Definition");
  fill(defPanel.body, definition(s));
  const groupPanel = panel("Consumer groups", { flush: true });
  fill(groupPanel.body, groups.length
    ? table({
      rowKey: (g) => g.consumerGroup,
      columns: [
        { key: "consumerGroup", label: "Group" },
        { key: "keys", label: "Keys", num: true },
        { key: "windowsAcked", label: "Windows acked", num: true },
        { key: "messagesAcked", label: "Messages acked", num: true },
        { key: "activeLeases", label: "Leases", num: true },
        { key: "lastAckedAt", label: "Last ack", render: (g) => ago(g.lastAckedAt) },
      ],
      rows: groups,
    })
    : empty("No consumer group yet", "Poll the stream with a consumerGroup."));
  const consumers = panel("Consumers by key", { flush: true, id: "stream-consumers" });
  fill(consumers.body, consumersTable(c.consumers));
  return h("div.stack#stream-detail", { dataset: { stream: name } },
    h("div.page-head", h("h2", `Stream ${name}`), badge(windowText(s), "info"),
      h("span.spacer"), remove, h("button", { type: "button", onclick: close }, "Close")),
    h("div.grid.two", defPanel.el, groupPanel.el),
    consumers.el);
}

/** Bytes as "512 B", "3.5 KB", then MB and GB. */
export function size(bytes) {
  const n = Number(bytes || 0);
  if (n < 1024) return `${num(n)} B`;
  return n < 1024 * 1024 ? `${num(Math.round(n / 102.4) / 10)} KB` : bytesKb(n / 1024);
}

const SDK_COLUMNS = [
  { key: "name", label: "Query", cls: "wrap" },
  { key: "sourceQueue", label: "Source", cls: "wrap", render: (q) => h("a", { href: `/queues?queue=${seg(q.sourceQueue)}` }, q.sourceQueue) },
  { key: "sinkQueue", label: "Sink", cls: "wrap hide-sm", render: (q) => q.sinkQueue || "–" },
  { key: "partitions", label: "Partitions", num: true, cls: "hide-sm" },
  { key: "stateRows", label: "State rows", num: true },
  { key: "stateBytes", label: "State size", render: (q) => size(q.stateBytes) },
  { key: "lag", label: "Lag", num: true },
  { key: "cycles", label: "Cycles", num: true, cls: "hide-sm" },
  { key: "lastCycleAt", label: "Last cycle", cls: "hide-sm", render: (q) => ago(q.lastCycleAt) },
];

function sdkQueries(queries) {
  if (!queries.length) {
    return empty("No SDK queries yet", "The official clients' Stream API registers one when it runs:",
      "from queen import Queen, Stream\n" +
      "await (Stream.from_(queen.queue('orders')).window_tumbling(seconds=60)\n" +
      "       .aggregate({'sum': lambda d: d['amount']}).to(queen.queue('totals'))\n" +
      `       .run(query_id='orders.totals', url='${location.origin}'))`);
  }
  return table({ columns: SDK_COLUMNS, rows: queries, rowKey: (q) => q.name });
}

function statsView(t) {
  return [
    stat("Streams", num(t.streams), `${num(t.partitionedStreams)} partitioned`),
    stat("Source queues", num(t.sources)),
    stat("Consumer groups", num(t.consumerGroups), `${num(t.keys)} key${t.keys === 1 ? "" : "s"}`),
    stat("Windows out", num(t.activeLeases), t.expiredLeases ? `${num(t.expiredLeases)} expired, to redeliver` : "leased now"),
    stat("Windows acked", num(t.windowsAcked), `${num(t.messagesAcked)} messages`),
    stat("Waiting polls", num(t.waitingPolls), "in the process that answered"),
  ];
}

function curlDefine() {
  return `curl -X POST ${location.origin}/api/v1/stream/define -H 'Content-Type: application/json' \\\n` +
    `  -d '{"name": "orders-per-minute", "source_queue_names": ["orders"], "window_duration_ms": 60000}'`;
}

export async function mount(view) {
  let selected = view.params.get("stream") || "";
  const stats = h("div.stats#stream-stats", { "aria-label": "Stream totals" });
  const detailBox = h("div.detail-box");
  const list = panel("All streams", { flush: true, id: "streams" });
  const sdk = panel("SDK queries", { flush: true, id: "sdk-queries" });
  fill(view.el, h("div.page-head", h("h1", "Streams"),
    h("p", "Windowed consumption over queues: each consumer group gets every window of each key once, in order.")),
  stats, detailBox, h("div.gap", list.el), h("div.gap", sdk.el));

  function open(name) {
    selected = name;
    view.set({ stream: name }, { push: true });
    return view.refresh().then(() => detailBox.scrollIntoView({ block: "start" }));
  }

  return async function refresh() {
    await Promise.all([
      load(stats, async () => statsView(await get(`${API}/resources/streams/stats`)), "the stream totals"),
      load(list.body, async () => {
        const { streams } = await get(`${API}/resources/streams`);
        if (!streams.length) return empty("No streams yet", "Define one over existing queues:", curlDefine());
        return table({
          columns: COLUMNS, rows: streams, rowKey: (s) => s.name, selected, onRow: (s) => open(s.name),
        });
      }, "the streams"),
      load(sdk.body, async () => sdkQueries((await get("/streams/v1/queries")).queries), "the SDK queries"),
      selected
        ? load(detailBox, () => detail(selected, () => open("")), `stream ${selected}`)
        : fill(detailBox),
    ]);
  };
}
