// Pages and their URLs (the history API: every page and its filters can be bookmarked).
// The server answers index.html at each page path (queen_threads/http/webapp.py PAGES,
// which also lists the query parameters each page may carry).

export const PAGES = [
  { path: "/", title: "Overview", load: () => import("./pages/overview.js") },
  { path: "/queues", title: "Queues", load: () => import("./pages/queues.js") },
  { path: "/messages", title: "Messages", load: () => import("./pages/messages.js") },
  { path: "/dlq", title: "Dead letters", load: () => import("./pages/dlq.js") },
  { path: "/groups", title: "Consumer groups", load: () => import("./pages/groups.js") },
  { path: "/streams", title: "Streams", load: () => import("./pages/streams.js") },
  { path: "/timers", title: "Timers", load: () => import("./pages/timers.js") },
  { path: "/traces", title: "Traces", load: () => import("./pages/traces.js") },
  { path: "/system", title: "System", load: () => import("./pages/system.js") },
];

const listeners = new Set();

export function onNavigate(listener) {
  listeners.add(listener);
}

function emit() {
  for (const listener of listeners) listener(location.pathname);
}

export function pageFor(path) {
  return PAGES.find((p) => p.path === path) || null;
}

/** The URL of `path` with `params` (empty values left out). */
export function href(path, params = {}) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") search.set(k, v);
  }
  const qs = search.toString();
  return qs ? `${path}?${qs}` : path;
}

/** Go to another page (or the same page with other parameters): the page is drawn anew. */
export function go(path, params = {}) {
  history.pushState(null, "", href(path, params));
  emit();
}

/**
 * Change parameters of the current page without drawing it anew (the page applies them
 * itself): filters replace the history entry, a selection (`push`) adds one.
 */
export function setParams(updates, { push = false } = {}) {
  const params = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(updates)) {
    if (v === undefined || v === null || v === "") params.delete(k);
    else params.set(k, v);
  }
  const qs = params.toString();
  const url = qs ? `${location.pathname}?${qs}` : location.pathname;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

export function params() {
  return new URLSearchParams(location.search);
}

window.addEventListener("popstate", emit);

// Links to pages are followed without reloading the document.
document.addEventListener("click", (e) => {
  const link = e.target.closest("a[href]");
  if (!link || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  const target = new URL(link.href, location.origin);
  if (target.origin !== location.origin || !pageFor(target.pathname) || link.target) return;
  e.preventDefault();
  history.pushState(null, "", target.pathname + target.search);
  emit();
});
