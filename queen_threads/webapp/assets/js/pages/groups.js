// Consumer groups: lag per group, per queue and per partition; seek to a time or to the
// end; delete a group (admin role).
import { API, del, get, post, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, duration, localInputToIso, num, time } from "../format.js";
import {
  actionButton, badge, confirmed, empty, field, load, panel, table, toast,
} from "../ui.js";

const STATE = { Stable: "ok", Lagging: "warn", Dead: "bad" };
const label = (g) => (g === "__QUEUE_MODE__" ? "queue mode (__QUEUE_MODE__)" : g);

const COLUMNS = [
  { key: "name", label: "Group", render: (g) => h("a", { href: `/groups?group=${seg(g.name)}` }, label(g.name)) },
  { key: "state", label: "State", render: (g) => badge(g.state, STATE[g.state] || "") },
  { key: "topics", label: "Queues", cls: "wrap", render: (g) => g.topics.join(", ") || "–" },
  { key: "totalLag", label: "Lag", num: true },
  { key: "maxTimeLag", label: "Time lag", render: (g) => duration(g.maxTimeLag) },
  { key: "partitionsWithLag", label: "Partitions behind", num: true, cls: "hide-sm" },
  { key: "lastActivityAt", label: "Last activity", cls: "hide-sm", render: (g) => ago(g.lastActivityAt) },
];

// What was typed into a seek-time field survives the live refresh that redraws it.
const seekTimes = new Map();

function seekControls(group, queue, done) {
  const key = `${group}\u0000${queue}`;
  const at = h("input", {
    type: "datetime-local", name: "seek-time", "aria-label": `Seek time for ${queue}`,
    value: seekTimes.get(key) || "", oninput: (e) => seekTimes.set(key, e.target.value),
  });
  const path = `${API}/consumer-groups/${seg(group)}/queues/${seg(queue)}/seek`;
  const toEnd = actionButton("Seek to end", async () => {
    await confirmed({
      title: `Skip everything ${label(group)} has not read in ${queue}?`,
      body: h("p", "The group's cursor moves past the newest message of every partition; its leases are dropped."),
      confirmLabel: "Seek to end",
    });
    const r = await post(path, { toEnd: true });
    toast(`Seeked ${r.partitionsUpdated} partition(s) of ${queue} to the end`);
    await done();
  }, { kind: "primary", what: "seeking a consumer group" });
  const toTime = actionButton("Seek to time", async () => {
    if (!at.value) throw new Error("Pick a time first");
    const timestamp = localInputToIso(at.value);
    const r = await post(path, { timestamp });
    toast(`Seeked ${r.partitionsUpdated} partition(s) of ${queue} to ${time(timestamp)}`);
    await done();
  }, { what: "seeking a consumer group" });
  return h("div.row", toEnd, at, toTime);
}

function partitionTable(q) {
  return table({
    rowKey: (p) => p.partition,
    columns: [
      { key: "partition", label: "Partition" },
      { key: "lag", label: "Lag", num: true },
      { key: "timeLagSeconds", label: "Time lag", render: (p) => duration(p.timeLagSeconds) },
      { key: "oldestUnconsumedAt", label: "Oldest unread", cls: "hide-sm", render: (p) => time(p.oldestUnconsumedAt) },
      { key: "leaseActive", label: "Lease", render: (p) => (p.leaseActive ? badge(`until ${time(p.leaseExpiresAt)}`, "warn") : "–") },
      { key: "lastConsumedAt", label: "Last consumed", render: (p) => ago(p.lastConsumedAt) },
    ],
    rows: q.partitionDetails || [],
  });
}

async function groupDetail(name, close, refresh) {
  const g = await get(`${API}/consumer-groups/${seg(name)}`);
  const remove = actionButton("Delete group", async () => {
    await confirmed({
      title: `Delete consumer group ${label(name)}?`,
      body: h("p", "Its cursors and leases on every queue go, and its subscriptions. Dead letters stay. Its next pop starts over."),
      confirmLabel: "Delete", danger: true,
    });
    await del(`${API}/consumer-groups/${seg(name)}`, { deleteMetadata: "true" });
    toast(`Deleted consumer group ${name}`);
    close();
  }, { kind: "danger", what: "deleting a consumer group (admin role)" });
  const queues = g.queues.map((q) => {
    const p = panel(`${q.queue}: lag ${num(q.totalLag)}`, { id: `group-queue-${q.queue}` });
    p.el.dataset.queue = q.queue;
    fill(p.body, seekControls(name, q.queue, refresh), h("div.gap", partitionTable(q)));
    return p.el;
  });
  return h("div.stack#group-detail", { dataset: { group: name } },
    h("div.page-head", h("h2", `Group ${label(name)}`), badge(g.state, STATE[g.state] || ""),
      h("span.muted", `lag ${num(g.totalLag)} · time lag ${duration(g.maxTimeLag)} · last activity ${ago(g.lastActivityAt)}`),
      h("span.spacer"), remove, h("button", { type: "button", onclick: close }, "Close")),
    queues.length ? queues : empty("This group reads no queue yet", "Its subscriptions take effect on its first pop."),
    g.subscriptions && g.subscriptions.length ? (() => {
      const p = panel("Subscriptions", { flush: true });
      fill(p.body, table({
        columns: [
          { key: "queue", label: "Queue", render: (s) => s.queue || "–" },
          { key: "namespace", label: "Namespace / task", render: (s) => (s.namespace ? `${s.namespace} / ${s.task || "*"}` : "–") },
          { key: "mode", label: "Mode" },
          { key: "timestamp", label: "From", render: (s) => time(s.timestamp) },
          { key: "createdAt", label: "Since", render: (s) => time(s.createdAt) },
        ],
        rows: g.subscriptions,
      }));
      return p.el;
    })() : null);
}

export async function mount(view) {
  let filter = view.params.get("q") || "";
  let selected = view.params.get("group") || "";
  const detailBox = h("div.detail-box");
  const list = panel("Consumer groups", { flush: true, id: "groups" });
  const search = h("input", {
    type: "search", placeholder: "Filter by group or queue", value: filter, "aria-label": "Filter groups",
    oninput: (e) => { filter = e.target.value; view.set({ q: filter }); view.refresh(); },
  });
  fill(view.el, h("div.page-head", h("h1", "Consumer groups"), h("span.spacer"), search), detailBox, h("div.gap", list.el));

  function open(name) {
    selected = name;
    view.set({ group: name }, { push: true });
    return view.refresh().then(() => detailBox.scrollIntoView({ block: "start" }));
  }

  return async function refresh() {
    await Promise.all([
      load(list.body, async () => {
        const groups = await get(`${API}/consumer-groups`);
        if (!groups.length) {
          return empty("No consumer groups yet", "A group appears when a consumer pops with a consumerGroup:",
            `curl "${location.origin}/api/v1/pop/queue/orders?consumerGroup=billing"`);
        }
        const needle = filter.trim().toLowerCase();
        const shown = groups.filter((g) => !needle || [g.name, ...g.topics].some((s) => s.toLowerCase().includes(needle)));
        return shown.length
          ? table({ columns: COLUMNS, rows: shown, rowKey: (g) => g.name, selected, onRow: (g) => open(g.name) })
          : empty("No group matches", `Nothing is named like "${filter}".`);
      }, "the consumer groups"),
      selected
        ? load(detailBox, () => groupDetail(selected, () => open(""), () => view.refresh()), `group ${selected}`)
        : fill(detailBox),
    ]);
  };
}
