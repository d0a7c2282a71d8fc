// Queues: every queue with its depth, in-flight, dead letters, groups and throughput;
// filter, sort, and a queue's detail (partitions, options, consumer groups' lag).
import { API, get, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, duration, num, rate, secondsSince } from "../format.js";
import {
  badge, curlPush, empty, kv, load, panel, sortRows, stat, table,
} from "../ui.js";

const COLUMNS = [
  {
    key: "name", label: "Queue",
    render: (q) => h("span", h("a", { href: `/queues?queue=${seg(q.name)}` }, q.name),
      q.namespace ? h("span.muted", ` ${q.namespace}${q.task ? `/${q.task}` : ""}`) : null),
  },
  { key: "partitions", label: "Partitions", num: true, cls: "hide-sm" },
  { key: "pending", label: "Depth", num: true, render: (q) => q.messages.pending, sort: (q) => q.messages.pending },
  { key: "processing", label: "In flight", num: true, render: (q) => q.messages.processing, sort: (q) => q.messages.processing },
  { key: "deadLettered", label: "Dead letters", num: true, render: (q) => q.messages.deadLettered, sort: (q) => q.messages.deadLettered },
  { key: "consumerGroups", label: "Groups", num: true },
  {
    key: "throughput", label: "Pushed, last hour", num: true,
    render: (q) => `${num(q.throughput.ingested)} · ${rate(q.throughput.ingestedPerSecond)}`,
    sort: (q) => q.throughput.ingested,
  },
  {
    key: "oldest", label: "Oldest waiting", cls: "hide-sm",
    render: (q) => (q.messages.oldestPendingAt ? duration(secondsSince(q.messages.oldestPendingAt)) : "–"),
    sort: (q) => (q.messages.oldestPendingAt ? -Date.parse(q.messages.oldestPendingAt) : null),
  },
  { key: "lastActivityAt", label: "Last push", cls: "hide-sm", render: (q) => ago(q.lastActivityAt) },
];

const RETRY_OPTIONS = ["retryLimit", "retryStrategy", "retryDelay", "retryDelayMax", "retryJitter"];

function optionsView(options) {
  const value = (v) => (typeof v === "boolean" ? badge(v ? "on" : "off", v ? "info" : "") : String(v));
  const rest = Object.keys(options).filter((k) => !RETRY_OPTIONS.includes(k)).sort();
  return [
    h("h3", "Retry policy"),
    kv(RETRY_OPTIONS.filter((k) => k in options).map((k) => [k, value(options[k])])),
    h("h3.gap", "Other options"),
    kv(rest.map((k) => [k, value(options[k])])),
  ];
}

function groupsTable(groups) {
  if (!groups.length) return empty("No consumer group reads this queue yet", "Pop from it to create one.");
  return table({
    rowKey: (g) => g.consumerGroup,
    columns: [
      { key: "consumerGroup", label: "Group", render: (g) => h("a", { href: `/groups?group=${seg(g.consumerGroup)}` }, g.consumerGroup) },
      { key: "lag", label: "Lag", num: true },
      { key: "timeLagSeconds", label: "Time lag", render: (g) => duration(g.timeLagSeconds) },
      { key: "partitions", label: "Partitions", num: true },
      { key: "activeLeases", label: "Leases", num: true },
      { key: "lastConsumedAt", label: "Last consumed", render: (g) => ago(g.lastConsumedAt) },
    ],
    rows: groups,
  });
}

function partitionsTable(partitions, queue) {
  return table({
    rowKey: (p) => p.name,
    columns: [
      { key: "name", label: "Partition", render: (p) => h("a", { href: `/messages?queue=${seg(queue)}&partition=${seg(p.name)}` }, p.name) },
      { key: "pending", label: "Waiting", num: true, render: (p) => p.messages.pending },
      { key: "processing", label: "In flight", num: true, render: (p) => p.messages.processing },
      { key: "completed", label: "Done", num: true, render: (p) => p.messages.completed },
      { key: "deadLettered", label: "Dead letters", num: true, render: (p) => p.messages.deadLettered },
      {
        key: "groups", label: "Group lag", cls: "wrap",
        render: (p) => (p.consumerGroups.length
          ? p.consumerGroups.map((g) => `${g.consumerGroup === "__QUEUE_MODE__" ? "queue mode" : g.consumerGroup}: ${num(g.lag)}`).join(", ")
          : "–"),
      },
      { key: "lastActivity", label: "Last push", render: (p) => ago(p.lastActivity) },
    ],
    rows: partitions,
  });
}

async function detail(name, close) {
  const [status, parts] = await Promise.all([
    get(`${API}/status/queues/${seg(name)}`),
    get(`${API}/resources/partitions`, { queue: name, limit: 1000 }),
  ]);
  const t = status.totals;
  const errors = status.deadLetterQueue.topErrors;
  return h("div.stack#queue-detail", { dataset: { queue: name } },
    h("div.page-head", h("h2", `Queue ${name}`),
      status.queue.namespace ? badge(`${status.queue.namespace}${status.queue.task ? ` / ${status.queue.task}` : ""}`, "info") : null,
      h("span.spacer"),
      h("a.button", { href: `/messages?queue=${seg(name)}` }, "Browse messages"),
      h("a.button", { href: `/dlq?queue=${seg(name)}` }, "Dead letters"),
      h("button", { type: "button", onclick: close }, "Close")),
    h("div.stats",
      stat("Depth", num(t.messages.pending), "waiting for queue mode"),
      stat("In flight", num(t.messages.processing), `${num(t.leases.active)} active leases`),
      stat("Done", num(t.messages.completed)),
      stat("Dead letters", num(t.messages.deadLettered)),
      stat("Partitions", num(t.partitions)),
      stat("Pushed, last hour", num(t.throughput.ingested), rate(t.throughput.ingestedPerSecond))),
    h("div.grid.two",
      (() => { const p = panel("Options"); fill(p.body, optionsView(status.queue.options)); return p.el; })(),
      (() => {
        const p = panel("Consumer groups", { flush: true });
        fill(p.body, groupsTable(status.consumerGroups));
        return p.el;
      })()),
    (() => {
      const p = panel(`Partitions (${num(parts.total)})`, { flush: true, id: "partitions" });
      fill(p.body, partitionsTable(parts.partitions, name));
      return p.el;
    })(),
    errors.length ? (() => {
      const p = panel("Most frequent dead-letter errors", { flush: true });
      fill(p.body, table({ columns: [{ key: "error", label: "Error", cls: "wrap" }, { key: "count", label: "Messages", num: true }], rows: errors }));
      return p.el;
    })() : null);
}

export async function mount(view) {
  let filter = view.params.get("q") || "";
  let sort = { key: view.params.get("sort") || "name", dir: view.params.get("dir") || "asc" };
  let selected = view.params.get("queue") || "";
  let queues = [];
  const search = h("input", {
    type: "search", placeholder: "Filter by name, namespace or task", value: filter,
    "aria-label": "Filter queues", oninput: (e) => {
      filter = e.target.value;
      view.set({ q: filter });
      draw();
    },
  });
  const detailBox = h("div.detail-box");
  const list = panel("All queues", { flush: true, id: "queues" });
  fill(view.el, h("div.page-head", h("h1", "Queues"), h("span.spacer"), search), detailBox,
    h("div.gap", list.el));

  function onSort(key) {
    if (sort.key === key) sort = { key, dir: sort.dir === "asc" ? "desc" : "asc" };
    else sort = { key, dir: key === "name" ? "asc" : "desc" };
    view.set({ sort: key, dir: sort.dir });
    draw();
  }

  function content() {
    const needle = filter.trim().toLowerCase();
    const shown = queues.filter((q) => !needle || [q.name, q.namespace, q.task].some((s) => (s || "").toLowerCase().includes(needle)));
    if (!queues.length) return empty("No queues yet", "Push a message and its queue is created:", curlPush());
    return shown.length
      ? table({
        columns: COLUMNS, rows: sortRows(shown, COLUMNS, sort.key, sort.dir), sort, onSort,
        rowKey: (q) => q.name, selected,
        onRow: (q) => { open(q.name); },
      })
      : empty("No queue matches", `Nothing is named like "${filter}".`);
  }

  function draw() {
    fill(list.body, content());
  }

  function open(name) {
    selected = name;
    view.set({ queue: name }, { push: true });
    draw();
    return load(detailBox, () => (name ? detail(name, () => open("")) : []), `queue ${name}`)
      .then(() => detailBox.scrollIntoView({ block: "start" }));
  }

  return async function refresh() {
    await Promise.all([
      load(list.body, async () => {
        queues = (await get(`${API}/status/queues`, { limit: 1000 })).queues;
        return content();
      }, "the queues"),
      selected ? load(detailBox, () => detail(selected, () => open("")), `queue ${selected}`) : null,
    ]);
  };
}
