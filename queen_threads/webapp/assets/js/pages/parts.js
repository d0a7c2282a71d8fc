// Pieces several pages share: a queue picker, paging, a timeline, trace events.
import { API, get } from "../api.js";
import { h, fill } from "../dom.js";
import { json, num, time } from "../format.js";
import { select } from "../ui.js";

/**
 * A <select> of every queue ("All queues" first) in `container`, drawn again only when the
 * list changes (a live refresh must not close it under the pointer). `names`: the queue
 * names when the page has them already.
 */
export async function queuePicker(container, value, onchange, names = null) {
  const list = names || (await get(`${API}/resources/queues`)).queues.map((q) => q.name);
  if (value && !list.includes(value)) list.push(value); // a bookmarked queue that is gone
  const key = list.join("\n");
  if (container.dataset.names === key && container.firstChild) return;
  container.dataset.names = key;
  fill(container, select("queue", [["", "All queues"], ...list.map((n) => [n, n])], value, onchange));
}

/** "1–50 of 120" with previous/next buttons; `go(offset)`. */
export function pager(total, offset, limit, go) {
  const last = Math.min(offset + limit, total);
  return h("div.row",
    h("span.muted.pager-text", total ? `${num(offset + 1)}–${num(last)} of ${num(total)}` : "0 of 0"),
    h("span.spacer"),
    h("button.small", { type: "button", disabled: offset === 0, onclick: () => go(Math.max(0, offset - limit)) }, "← Newer"),
    h("button.small", { type: "button", disabled: last >= total, onclick: () => go(offset + limit) }, "Older →"));
}

/** items: [{at, title, text, detail}] in the order given. */
export function timeline(items) {
  return h("ol.timeline", items.map((item) => h("li",
    h("div", h("strong", item.title), " ", h("span.when", time(item.at))),
    item.text ? h("div", item.text) : null,
    item.detail !== undefined ? h("pre.code", json(item.detail)) : null)));
}

export function traceItems(traces) {
  return traces.map((t) => ({
    at: t.createdAt,
    title: t.eventType,
    text: [t.consumerGroup && t.consumerGroup !== "__QUEUE_MODE__" ? `group ${t.consumerGroup}` : "",
      t.traceNames && t.traceNames.length ? `names: ${t.traceNames.join(", ")}` : "",
      t.workerId ? `worker ${t.workerId}` : ""].filter(Boolean).join(" · "),
    detail: t.data,
  }));
}
