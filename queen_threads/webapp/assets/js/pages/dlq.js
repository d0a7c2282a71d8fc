// Dead letters: filter by queue, group, error and time; requeue one, a selection, or every
// match (after a dry run that says how many), and watch them leave.
import { API, get, post, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { isoToLocalInput, localInputToIso, num, time } from "../format.js";
import {
  actionButton, badge, errorBox, confirmed, empty, field, load, panel, table, toast,
} from "../ui.js";
import { pager, queuePicker } from "./parts.js";

const LIMIT = 100;
const GROUP_LABEL = (g) => (g === "__QUEUE_MODE__" ? "queue mode" : g);

function dryRunView(result) {
  return h("div.stack",
    h("p", `${num(result.matched)} message(s) in ${num(result.partitions)} partition(s) match; `,
      `at most ${num(result.limit)} are requeued by this run. Each gets a copy at the tail of its partition.`),
    result.sample && result.sample.length
      ? table({
        columns: [
          { key: "transactionId", label: "Transaction id", cls: "mono" },
          { key: "queue", label: "Queue" },
          { key: "error", label: "Error", cls: "wrap", render: (s) => s.deadLetters.map((d) => d.errorMessage).join("; ") },
        ],
        rows: result.sample,
      })
      : null);
}

export async function mount(view) {
  const f = Object.fromEntries(["queue", "consumerGroup", "error", "from", "to", "offset"]
    .map((k) => [k, view.params.get(k) || ""]));
  const picked = new Map(); // row key -> {partitionId, transactionId}
  const queuePick = h("span");
  const setFilter = (key, value) => {
    f[key] = value;
    f.offset = "";
    picked.clear();
    view.set({ [key]: value, offset: "" });
    view.refresh();
  };
  const text = (key, placeholder) => h("input", {
    type: "search", name: key, placeholder, value: f[key], onchange: (e) => setFilter(key, e.target.value.trim()),
  });
  const when = (key) => h("input", {
    type: "datetime-local", name: key, value: isoToLocalInput(f[key]),
    onchange: (e) => setFilter(key, localInputToIso(e.target.value)),
  });
  const filterBody = () => {
    const body = {};
    for (const k of ["queue", "consumerGroup", "error", "from", "to"]) if (f[k]) body[k] = f[k];
    return body;
  };

  async function requeueMany(body, what) {
    const dry = await post(`${API}/dlq/requeue`, { ...body, dryRun: true });
    if (!dry.matched) {
      toast(`Nothing to requeue: no dead letter matches ${what}.`);
      return;
    }
    await confirmed({ title: `Requeue ${what}?`, body: dryRunView(dry), confirmLabel: `Requeue ${num(Math.min(dry.matched, dry.limit))}` });
    const done = await post(`${API}/dlq/requeue`, body);
    toast(`Requeued ${num(done.requeued)} message(s)`);
    picked.clear();
    await view.refresh();
  }

  const selectedButton = actionButton("Requeue selected", () => requeueMany({ ids: [...picked.values()] }, `${picked.size} selected message(s)`),
    { what: "requeueing dead letters" });
  const allButton = actionButton("Requeue all matching…", () => requeueMany(filterBody(), "every dead letter matching the filters"),
    { kind: "primary", what: "requeueing dead letters" });
  const syncButtons = () => {
    selectedButton.disabled = picked.size === 0;
    selectedButton.textContent = picked.size ? `Requeue selected (${picked.size})` : "Requeue selected";
    allButton.disabled = Object.keys(filterBody()).length === 0;
    allButton.title = allButton.disabled ? "Choose a queue, group, error or time range first" : "";
  };

  const list = panel("Dead letters", { flush: true, id: "dlq", actions: [selectedButton, allButton] });
  const foot = h("div.panel-body");
  list.el.append(foot);
  fill(view.el,
    h("div.page-head", h("h1", "Dead letters"),
      h("p", "Messages that failed past their queue's retry limit (or were dead-lettered by hand). Requeue puts a copy at the tail of the partition.")),
    h("div.filters",
      field("Queue", queuePick),
      field("Consumer group", text("consumerGroup", "any")),
      field("Error contains", text("error", "e.g. timeout")),
      field("Failed after", when("from")),
      field("Failed before", when("to"))),
    list.el);

  function row(d) {
    const key = `${d.partitionId}/${d.transactionId}/${d.consumerGroup}`;
    const box = h("input", {
      type: "checkbox", "aria-label": `Select ${d.transactionId}`, checked: picked.has(key),
      onchange: (e) => {
        if (e.target.checked) picked.set(key, { partitionId: d.partitionId, transactionId: d.transactionId });
        else picked.delete(key);
        syncButtons();
      },
    });
    const requeue = actionButton("Requeue", async (button) => {
      await post(`${API}/messages/${seg(d.partitionId)}/${seg(d.transactionId)}/retry`, { consumerGroup: d.consumerGroup });
      button.closest("tr").classList.add("leaving");
      toast(`Requeued ${d.transactionId}`);
      picked.delete(key);
      await view.refresh();
    }, { kind: "small", what: "requeueing a dead letter" });
    return { ...d, key, box, requeue };
  }

  return async function refresh() {
    syncButtons();
    await Promise.all([
      queuePicker(queuePick, f.queue, (v) => setFilter("queue", v)).catch((err) => fill(queuePick, errorBox(err, "the queue list"))),
      load(list.body, async () => {
        const offset = Number(f.offset) || 0;
        const page = await get(`${API}/dlq`, {
          queue: f.queue, consumerGroup: f.consumerGroup, error: f.error, from: f.from, to: f.to, limit: LIMIT, offset,
        });
        const rows = page.messages.map(row);
        fill(foot, pager(page.total, offset, LIMIT, (next) => { f.offset = next ? String(next) : ""; view.set({ offset: f.offset }); view.refresh(); }));
        if (!rows.length) {
          return Object.keys(filterBody()).length
            ? empty("No dead letter matches these filters", "Clear a filter to see more.")
            : empty("The dead-letter queue is empty", "Nothing has failed past its retry limit. Messages land here when a consumer acks them with status \u201cfailed\u201d too often.");
        }
        return table({
          rowKey: (d) => d.key,
          columns: [
            { key: "box", label: "", render: (d) => d.box },
            { key: "failedAt", label: "Failed", render: (d) => time(d.failedAt) },
            { key: "queue", label: "Queue", render: (d) => h("a", { href: `/queues?queue=${seg(d.queue)}` }, d.queue) },
            { key: "partition", label: "Partition", cls: "hide-sm" },
            { key: "consumerGroup", label: "Group", render: (d) => GROUP_LABEL(d.consumerGroup) },
            { key: "errorMessage", label: "Error", cls: "wrap", render: (d) => [d.errorMessage || "–", d.errorType ? [" ", badge(d.errorType, "warn")] : null] },
            { key: "retryCount", label: "Retries", num: true },
            {
              key: "transactionId", label: "Message", cls: "mono",
              render: (d) => h("a", { href: `/messages?queue=${seg(d.queue)}&partitionId=${seg(d.partitionId)}&transactionId=${seg(d.transactionId)}` }, d.transactionId),
            },
            { key: "requeue", label: "", render: (d) => d.requeue },
          ],
          rows,
        });
      }, "the dead-letter queue"),
    ]);
  };
}
