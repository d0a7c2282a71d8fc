// The page's building blocks: panels, stats, tables, empty states, errors, dialogs, toasts.
import { h, fill } from "./dom.js";
import { askForToken } from "./auth.js";
import { num } from "./format.js";

export function panel(title, { actions = [], flush = false, id } = {}) {
  const body = h(`div.panel-body${flush ? ".flush" : ""}`);
  const head = h("div.panel-head", h("h2", title), actions);
  const el = h("section.panel", { id, "aria-label": title }, head, body);
  return { el, head, body };
}

export function stat(label, value, hint, { id } = {}) {
  return h("div.stat", { id, dataset: { stat: label } },
    h("div.label", label), h("div.value", value), hint ? h("div.hint", hint) : null);
}

export function badge(text, kind = "") {
  return h(`span.badge${kind ? `.${kind}` : ""}`, text);
}

export function kv(pairs) {
  return h("dl.kv", pairs.filter(Boolean).map(([k, v]) => [h("dt", k), h("dd", v)]));
}

export function codeBlock(text) {
  return h("pre.code", text);
}

/** An empty state that says what to do: a title, a sentence and an optional command. */
export function empty(title, text, command) {
  return h("div.empty", h("strong", title), text ? h("div", text) : null,
    command ? h("pre", h("code", command)) : null);
}

export function curlPush(queue = "orders") {
  const origin = window.location.origin;
  return `curl -X POST ${origin}/api/v1/push -H 'Content-Type: application/json' \\\n` +
    `  -d '{"items": [{"queue": "${queue}", "payload": {"hello": "world"}}]}'`;
}

/** What an API error means for the person looking at the page. */
export function explain(err, what = "this") {
  if (!err || err.status === undefined) return `Something went wrong: ${err && err.message}`;
  switch (err.status) {
    case 0: return err.message;
    case 401: return `Sign in to see ${what}: the server needs a token (${err.message}).`;
    case 403: return `Your role cannot do this: ${what} needs a token with a higher role.`;
    case 503: return `The server or its database is unavailable right now (${err.message}). ` +
      "It is retried automatically.";
    default: return err.message;
  }
}

export function errorBox(err, what) {
  const box = h("div.notice.error", { role: "alert", dataset: { status: String(err.status ?? "") } },
    explain(err, what));
  if (err.status === 401) {
    box.append(" ", h("button.small", {
      type: "button",
      onclick: () => askForToken("", { force: true }).then(() => window.dispatchEvent(new Event("queen:refresh")), () => {}),
    }, "Sign in"));
  }
  return box;
}

/**
 * Fill `el` with what `render()` resolves to; an error shows in its place (never a blank
 * panel). Returns the error, or null.
 */
export async function load(el, render, what) {
  try {
    fill(el, await render());
    return null;
  } catch (err) {
    if (err && err.name === "AbortError") return null;
    fill(el, errorBox(err, what));
    return err;
  }
}

/**
 * A table. columns: [{key, label, num, render(row), sort(row), cls}]; `sort`: {key, dir}
 * with `onSort(key)` makes the headers sort buttons; `onRow(row)` makes rows clickable.
 */
export function table({ columns, rows, sort, onSort, onRow, rowKey, selected, caption }) {
  const head = h("tr", columns.map((c) => {
    const sorted = sort && sort.key === c.key;
    const label = onSort && c.sortable !== false
      ? h("button.sort", { type: "button", onclick: () => onSort(c.key) }, c.label)
      : c.label;
    return h(`th${c.num ? ".num" : ""}${c.cls ? `.${c.cls}` : ""}`, {
      scope: "col", "aria-sort": sorted ? (sort.dir === "asc" ? "ascending" : "descending") : undefined,
    }, label);
  }));
  const body = rows.map((row) => {
    const key = rowKey ? rowKey(row) : undefined;
    const tr = h("tr", {
      class: [onRow ? "clickable" : "", selected && key === selected ? "selected" : ""].join(" ").trim(),
      dataset: key === undefined ? undefined : { key },
      tabindex: onRow ? 0 : undefined,
    }, columns.map((c) => {
      const value = c.render ? c.render(row) : row[c.key];
      return h(`td${c.num ? ".num" : ""}${c.cls ? `.${c.cls}` : ""}`,
        c.num && typeof value === "number" ? num(value) : value);
    }));
    if (onRow) {
      tr.addEventListener("click", (e) => {
        if (!e.target.closest("button, a, input, label")) onRow(row);
      });
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") onRow(row); });
    }
    return tr;
  });
  return h("div.table-wrap", h("table", caption ? h("caption.muted", caption) : null,
    h("thead", head), h("tbody", body)));
}

/** Sort `rows` by the column `key` (its `sort(row)`, else row[key]). */
export function sortRows(rows, columns, key, dir) {
  const column = columns.find((c) => c.key === key);
  if (!column) return rows;
  const value = column.sort || ((row) => row[key]);
  const factor = dir === "asc" ? 1 : -1;
  return [...rows].sort((a, b) => {
    const x = value(a);
    const y = value(b);
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (typeof x === "string" ? x.localeCompare(y) : x - y) * factor;
  });
}

export function field(label, control) {
  return h("label.field", h("span", label), control);
}

export function select(name, options, value, onchange) {
  return h("select", { name, onchange: (e) => onchange(e.target.value) },
    options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
}

/** A row of toggle buttons; `onchange(value)` on click. */
export function segmented(options, value, onchange, label) {
  const group = h("div.segmented", { role: "group", "aria-label": label });
  for (const [v, text] of options) {
    group.append(h("button", {
      type: "button", "aria-pressed": String(v === value), dataset: { value: v },
      onclick: () => {
        group.querySelectorAll("button").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.value === v)));
        onchange(v);
      },
    }, text));
  }
  return group;
}

export function toast(message, { error = false } = {}) {
  const el = h(`div.toast${error ? ".error" : ""}`, message);
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), error ? 8000 : 4000);
}

/** A button that runs `action` once per click, disabled meanwhile; errors become a toast. */
export function actionButton(label, action, { kind = "", what = "this action", title } = {}) {
  const button = h(`button${kind ? `.${kind}` : ""}`, { type: "button", title }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await action(button);
    } catch (err) {
      if (err && err.message !== "cancelled") toast(explain(err, what), { error: true });
    } finally {
      if (button.isConnected) button.disabled = false;
    }
  });
  return button;
}

/** A modal question; resolves true when confirmed. */
export function confirm({ title, body, confirmLabel = "Confirm", danger = false }) {
  return new Promise((resolve) => {
    const ok = h(`button${danger ? ".danger" : ".primary"}`, { type: "submit", value: "ok" }, confirmLabel);
    const dialog = h("dialog.confirm-dialog", { "aria-label": title },
      h("form", { method: "dialog" }, h("h2", title), body,
        h("div.actions", h("button", { type: "submit", value: "cancel" }, "Cancel"), ok)));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
    ok.focus();
  });
}

/** Throws "cancelled" unless the person confirms (for use inside actionButton). */
export async function confirmed(options) {
  if (!(await confirm(options))) throw new Error("cancelled");
}
