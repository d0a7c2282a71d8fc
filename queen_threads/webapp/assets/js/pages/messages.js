// Messages: browse by queue, partition, status and time; open one (payload, metadata,
// leases, attempts, traces); delete it or requeue it.
import { API, del, get, post, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, isoToLocalInput, json, localInputToIso, num, time } from "../format.js";
import {
  actionButton, badge, errorBox, codeBlock, confirmed, curlPush, empty, field, kv, load, panel, select,
  table, toast,
} from "../ui.js";
import { pager, queuePicker, timeline, traceItems } from "./parts.js";

const LIMIT = 50;
const STATUSES = [["", "Any status"], ["pending", "Pending"], ["processing", "Processing"],
  ["completed", "Completed"], ["dead_letter", "Dead letter"]];
const STATUS_BADGE = { pending: "info", processing: "warn", completed: "ok", dead_letter: "bad" };

export const statusBadge = (status) => badge(status.replace("_", " "), STATUS_BADGE[status] || "");

const COLUMNS = [
  { key: "createdAt", label: "Created", render: (m) => time(m.createdAt) },
  { key: "transactionId", label: "Transaction id", cls: "mono", render: (m) => m.transactionId },
  { key: "queue", label: "Queue" },
  { key: "partition", label: "Partition", cls: "hide-sm" },
  { key: "status", label: "Status", render: (m) => statusBadge(m.status) },
  {
    key: "groups", label: "Groups done", cls: "hide-sm",
    render: (m) => (m.busStatus.totalGroups ? `${m.busStatus.consumedBy} / ${m.busStatus.totalGroups}` : "–"),
  },
];

function groupRows(groups) {
  return table({
    rowKey: (g) => g.consumerGroup,
    columns: [
      { key: "consumerGroup", label: "Group", render: (g) => (g.consumerGroup === "__QUEUE_MODE__" ? "queue mode" : g.consumerGroup) },
      { key: "status", label: "Status", render: (g) => statusBadge(g.deadLettered ? "dead_letter" : g.status) },
      { key: "lease", label: "Lease", render: (g) => (g.leased ? `until ${time(g.leaseExpiresAt)}` : "–") },
      { key: "retryCount", label: "Attempts failed", num: true, render: (g) => g.attempt ?? g.retryCount ?? 0 },
      { key: "nextAttemptAt", label: "Next attempt", render: (g) => (g.nextAttemptAt ? ago(g.nextAttemptAt) : "–") },
      { key: "lastError", label: "Last error", cls: "wrap", render: (g) => g.lastError || g.errorMessage || "–" },
    ],
    rows: groups,
  });
}

function attempts(groups) {
  const items = groups.flatMap((g) => (g.attempts || []).map((a) => ({
    at: a.failedAt,
    title: `Attempt ${a.attempt} failed${g.consumerGroup === "__QUEUE_MODE__" ? "" : ` in ${g.consumerGroup}`}`,
    text: [a.error, a.errorType ? `(${a.errorType})` : "", a.delayMs ? `· retry after ${num(a.delayMs)} ms` : ""].filter(Boolean).join(" "),
  })));
  return items.length ? timeline(items.sort((a, b) => Date.parse(a.at) - Date.parse(b.at))) : h("p.muted", "No failed attempts.");
}

async function messageDetail(pid, tid, done) {
  const [m, traces] = await Promise.all([
    get(`${API}/messages/${seg(pid)}/${seg(tid)}`),
    get(`${API}/traces/${seg(pid)}/${seg(tid)}`).catch(() => ({ traces: [] })),
  ]);
  const deadIn = m.consumerGroups.filter((g) => g.deadLettered).map((g) => g.consumerGroup);
  const queueMode = m.consumerGroups.find((g) => g.consumerGroup === "__QUEUE_MODE__");
  const status = !queueMode ? "pending" : queueMode.deadLettered ? "dead_letter" : queueMode.status;
  const requeue = actionButton("Requeue", async () => {
    await confirmed({
      title: "Requeue this message?",
      body: h("p", `A copy goes to the tail of partition ${m.partition} for ${deadIn.join(", ")}; its dead-letter rows are removed.`),
      confirmLabel: "Requeue",
    });
    const r = await post(`${API}/messages/${seg(pid)}/${seg(tid)}/retry`);
    toast(`Requeued as ${r.newTransactionId}`);
    done();
  }, { kind: "primary", what: "requeueing a message" });
  requeue.disabled = !deadIn.length;
  if (!deadIn.length) requeue.title = "Only a dead-lettered message can be requeued";
  const remove = actionButton("Delete", async () => {
    await confirmed({
      title: "Delete this message?",
      body: h("p", "The message, its dead-letter rows and its traces are deleted. This cannot be undone."),
      confirmLabel: "Delete", danger: true,
    });
    await del(`${API}/messages/${seg(pid)}/${seg(tid)}`);
    toast(`Deleted ${tid}`);
    done();
  }, { kind: "danger", what: "deleting a message" });
  const p = panel(`Message ${tid}`, {
    id: "message-detail",
    actions: [requeue, remove, h("a.button", { href: `/traces?partitionId=${seg(pid)}&transactionId=${seg(tid)}` }, "Traces"),
      h("button", { type: "button", onclick: () => done(true) }, "Close")],
  });
  fill(p.body, h("div.grid.two",
    h("div", h("h3", "Headers"), kv([
      ["Status (queue mode)", statusBadge(status)],
      ["Id", m.id], ["Transaction id", h("span.mono", m.transactionId)], ["Partition id", h("span.mono", m.partitionId)],
      ["Queue", h("a", { href: `/queues?queue=${seg(m.queue)}` }, m.queue)], ["Partition", m.partition],
      m.namespace ? ["Namespace / task", `${m.namespace} / ${m.task || "–"}`] : null,
      ["Created", time(m.createdAt)], ["Trace id", m.traceId || "–"], ["Producer", m.producerSub || "–"],
    ])),
    h("div", h("h3", "Payload"), m.decryptionError ? h("p.notice.warn", `Not decrypted: ${m.decryptionError}`) : null,
      codeBlock(json(m.data)))),
  h("h3.gap", "Consumer groups and leases"), m.consumerGroups.length ? groupRows(m.consumerGroups) : h("p.muted", "No consumer group has read this partition yet."),
  h("h3.gap", "Attempts"), attempts(m.consumerGroups),
  h("h3.gap", "Traces"), traces.traces.length ? timeline(traceItems(traces.traces)) : h("p.muted", "No traces."));
  return p.el;
}

export async function mount(view) {
  const f = Object.fromEntries(["queue", "partition", "status", "from", "to", "offset", "partitionId", "transactionId"]
    .map((k) => [k, view.params.get(k) || ""]));
  const queuePick = h("span");
  const setFilter = (key, value) => {
    f[key] = value;
    f.offset = "";
    view.set({ [key]: value, offset: "" });
    view.refresh();
  };
  const input = (key, attrs) => h("input", { ...attrs, value: key === "from" || key === "to" ? isoToLocalInput(f[key]) : f[key],
    onchange: (e) => setFilter(key, key === "from" || key === "to" ? localInputToIso(e.target.value) : e.target.value.trim()) });
  const detailBox = h("div.detail-box");
  const list = panel("Messages", { flush: true, id: "messages" });
  const foot = h("div.panel-body");
  list.el.append(foot);
  fill(view.el,
    h("div.page-head", h("h1", "Messages")),
    h("div.filters",
      field("Queue", queuePick),
      field("Partition", input("partition", { type: "text", placeholder: "any", name: "partition" })),
      field("Status", select("status", STATUSES, f.status, (v) => setFilter("status", v))),
      field("Created after", input("from", { type: "datetime-local", name: "from" })),
      field("Created before", input("to", { type: "datetime-local", name: "to" }))),
    detailBox, h("div.gap", list.el));

  function open(pid, tid) {
    f.partitionId = pid;
    f.transactionId = tid;
    view.set({ partitionId: pid, transactionId: tid }, { push: true });
    return showDetail().then(() => detailBox.scrollIntoView({ block: "start" }));
  }

  function showDetail() {
    if (!f.partitionId || !f.transactionId) return Promise.resolve(fill(detailBox));
    return load(detailBox, () => messageDetail(f.partitionId, f.transactionId, (closeOnly) => {
      if (closeOnly === true) open("", "");
      else { open("", ""); view.refresh(); }
    }), "this message");
  }

  return async function refresh() {
    await Promise.all([
      queuePicker(queuePick, f.queue, (v) => setFilter("queue", v)).catch((err) => fill(queuePick, errorBox(err, "the queue list"))),
      load(list.body, async () => {
        const offset = Number(f.offset) || 0;
        const page = await get(`${API}/messages`, {
          queue: f.queue, partition: f.partition, status: f.status, from: f.from, to: f.to, limit: LIMIT, offset,
        });
        fill(foot, pager(page.total, offset, LIMIT, (next) => { f.offset = next ? String(next) : ""; view.set({ offset: f.offset }); view.refresh(); }));
        if (!page.messages.length) {
          const filtered = f.queue || f.partition || f.status || f.from || f.to;
          return filtered
            ? empty("No message matches these filters", "Widen the time range or clear a filter.")
            : empty("No messages yet", "Push one and it shows up here:", curlPush());
        }
        return table({
          columns: COLUMNS, rows: page.messages, rowKey: (m) => `${m.partitionId}/${m.transactionId}`,
          selected: `${f.partitionId}/${f.transactionId}`,
          onRow: (m) => open(m.partitionId, m.transactionId),
        });
      }, "the messages"),
      showDetail(),
    ]);
  };
}
