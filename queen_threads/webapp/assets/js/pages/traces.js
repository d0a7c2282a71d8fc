// Traces: search by trace name or by message; a message's traces as a timeline.
import { API, get, seg } from "../api.js";
import { h, fill } from "../dom.js";
import { ago, num, time } from "../format.js";
import { empty, field, load, panel, table } from "../ui.js";
import { timeline, traceItems } from "./parts.js";

const CURL_TRACE = () => `curl -X POST ${location.origin}/api/v1/traces -H 'Content-Type: application/json' \\\n` +
  `  -d '{"transactionId": "<id>", "partitionId": "<uuid>", "traceNames": ["order-1234"], "data": {"step": "charged"}}'`;

function messageLink(t) {
  return h("a", { href: `/traces?partitionId=${seg(t.partitionId)}&transactionId=${seg(t.transactionId)}` }, t.transactionId);
}

export async function mount(view) {
  const state = Object.fromEntries(["name", "partitionId", "transactionId"].map((k) => [k, view.params.get(k) || ""]));
  const nameInput = h("input", { type: "search", name: "name", placeholder: "e.g. order-1234", value: state.name });
  const pidInput = h("input", { type: "text", name: "partitionId", placeholder: "partition id (uuid)", value: state.partitionId, size: 38 });
  const tidInput = h("input", { type: "text", name: "transactionId", placeholder: "transaction id", value: state.transactionId });
  const byName = panel("Traces by name", { id: "by-name", flush: true });
  const byMessage = panel("A message's timeline", { id: "by-message" });
  const names = panel("Recent trace names", { id: "trace-names" });
  const search = (updates) => {
    Object.assign(state, updates);
    view.set(updates, { push: true });
    view.refresh();
  };
  fill(view.el,
    h("div.page-head", h("h1", "Traces"),
      h("p", "Consumers record what they did with a message (POST /api/v1/traces); failed acks add retry and dead-letter events.")),
    h("div.filters",
      h("form.row", { onsubmit: (e) => { e.preventDefault(); search({ name: nameInput.value.trim() }); } },
        field("Trace name", nameInput), h("button.primary", { type: "submit" }, "Search")),
      h("form.row", {
        onsubmit: (e) => {
          e.preventDefault();
          search({ partitionId: pidInput.value.trim(), transactionId: tidInput.value.trim() });
        },
      }, field("Partition id", pidInput), field("Transaction id", tidInput), h("button", { type: "submit" }, "Show timeline"))),
    h("div.grid.two", h("div.stack", byName.el, byMessage.el), names.el));

  return async function refresh() {
    await Promise.all([
      load(names.body, async () => {
        const { names: list } = await get(`${API}/traces/names`, { limit: 20 });
        if (!list.length) return empty("No traces yet", "Consumers write them like this:", CURL_TRACE());
        return h("ul.plain", list.map((n) => h("li", h("a", { href: `/traces?name=${seg(n.name)}` }, n.name),
          h("span.muted", ` · ${num(n.traceCount)} event(s), last ${ago(n.lastSeen)}`))));
      }, "the trace names"),
      load(byName.body, async () => {
        if (!state.name) return h("p.muted.panel-body", "Search a trace name to list its events.");
        const page = await get(`${API}/traces/by-name/${seg(state.name)}`, { limit: 100 });
        if (!page.traces.length) return empty(`No trace named "${state.name}"`, "Names are exact; recent ones are listed on the right.");
        return table({
          columns: [
            { key: "createdAt", label: "When", render: (t) => time(t.createdAt) },
            { key: "eventType", label: "Event" },
            { key: "queue", label: "Queue" },
            { key: "transactionId", label: "Message", cls: "mono", render: messageLink },
            { key: "consumerGroup", label: "Group", cls: "hide-sm", render: (t) => t.consumerGroup || "–" },
          ],
          rows: page.traces,
          caption: page.total > page.traces.length ? `Newest ${page.traces.length} of ${num(page.total)}` : undefined,
        });
      }, "the traces"),
      load(byMessage.body, async () => {
        if (!state.partitionId || !state.transactionId) {
          return h("p.muted", "Open a message's traces from the Messages page, or enter its partition id and transaction id above.");
        }
        const body = await get(`${API}/traces/${seg(state.partitionId)}/${seg(state.transactionId)}`);
        const open = h("a", { href: `/messages?partitionId=${seg(state.partitionId)}&transactionId=${seg(state.transactionId)}` }, "open the message");
        if (!body.traces.length) return h("p.muted", `Message ${state.transactionId} has no traces yet (`, open, ").");
        return [h("p", `Message ${state.transactionId} · ${body.traces.length} event(s) · `, open), timeline(traceItems(body.traces))];
      }, "this message's traces"),
    ]);
  };
}
