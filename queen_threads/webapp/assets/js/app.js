// The dashboard's entry point: navigation bar, pages, live refresh, token, theme, and an
// error banner so that a failure never leaves a blank screen.
import { h, fill } from "./dom.js";
import { PAGES, pageFor, onNavigate, params, setParams, go } from "./router.js";
import { token, clearToken } from "./auth.js";
import { errorBox } from "./ui.js";
import { initTheme, themeButton } from "./theme.js";

const REFRESH_MS = 3000;

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const tools = document.getElementById("tools");
const navToggle = document.getElementById("nav-toggle");
const topbar = document.querySelector(".topbar");
let current = { refresh: null, cleanups: [] };
let inFlight = null;
let queued = null;
let timer = null;
let paused = false;

// ---- errors: shown in the page, whatever broke ------------------------------------------
function banner(message) {
  let el = document.getElementById("banner");
  if (!el) {
    el = h("div.banner#banner", { role: "alert" });
    topbar.after(el);
  }
  el.textContent = message;
}
window.addEventListener("error", (e) => banner(`Something went wrong in the page: ${e.message}`));
window.addEventListener("unhandledrejection", (e) => {
  const reason = e.reason && e.reason.message ? e.reason.message : String(e.reason);
  banner(`Something went wrong in the page: ${reason}`);
});

// ---- live refresh, paused while the tab is hidden -----------------------------------------
// "Live · <time of the last refresh>"; the time also in the tooltip, for a bar that hides it
const liveWord = document.createTextNode("Live");
const liveTime = h("span.time");
const live = h("button.live.icon", { type: "button", title: "Pause or resume the live refresh" },
  h("span.dot"), h("span.text", liveWord, liveTime));
live.addEventListener("click", () => {
  paused = !paused;
  live.classList.toggle("paused", paused);
  if (!paused) schedule(0);
  else {
    liveWord.textContent = "Paused";
    liveTime.textContent = "";
  }
});

/** Refresh the page; asked for while a refresh runs, it runs once more after that one. */
function refresh() {
  if (!current.refresh) return Promise.resolve();
  if (inFlight) {
    if (!queued) queued = inFlight.then(() => { queued = null; return refresh(); });
    return queued;
  }
  const run = current.refresh;
  inFlight = Promise.resolve()
    .then(() => run())
    .then(() => {
      live.classList.remove("failing");
      if (!paused) {
        const time = new Date().toLocaleTimeString();
        liveWord.textContent = "Live";
        liveTime.textContent = ` · ${time}`;
        live.title = `Refreshed at ${time}: pause or resume the live refresh`;
      }
    })
    .catch((err) => {
      live.classList.add("failing");
      banner(`Refreshing failed: ${err.message}`);
    })
    .finally(() => { inFlight = null; });
  return inFlight;
}

function schedule(delay = REFRESH_MS) {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    if (!document.hidden && !paused) await refresh();
    schedule();
  }, delay);
}

document.addEventListener("visibilitychange", () => {
  if (document.hidden) clearTimeout(timer);
  else schedule(0);
});
window.addEventListener("queen:refresh", () => refresh());

// ---- pages ---------------------------------------------------------------------------------
// Where the bar is too narrow for every tab (app.css) they sit behind the "Pages" button;
// picking a page, Escape or a click elsewhere closes them.
function showMenu(open) {
  topbar.classList.toggle("nav-open", open);
  navToggle.setAttribute("aria-expanded", String(open));
}
navToggle.addEventListener("click", () => showMenu(navToggle.getAttribute("aria-expanded") !== "true"));
document.addEventListener("keydown", (e) => { if (e.key === "Escape") showMenu(false); });
document.addEventListener("click", (e) => { if (!topbar.contains(e.target)) showMenu(false); });

function drawNav(path) {
  fill(nav, PAGES.map((p) => h("a", {
    href: p.path, "aria-current": p.path === path ? "page" : undefined,
  }, p.title)));
}

async function show(path) {
  for (const fn of current.cleanups) fn();
  current = { refresh: null, cleanups: [] };
  showMenu(false);
  drawNav(path);
  const page = pageFor(path);
  const container = h("div.page");
  fill(main, container);
  if (!page) {
    fill(container, h("div.empty", h("strong", "No such page"), h("a", { href: "/" }, "Go to the overview")));
    return;
  }
  document.title = `${page.title} · Queen`;
  const mine = current;
  try {
    const module = await page.load();
    if (mine !== current) return; // another page was asked for meanwhile
    const view = {
      el: container,
      params: params(),
      set: setParams,
      go,
      cleanup: (fn) => mine.cleanups.push(fn),
      refresh: () => refresh(),
    };
    mine.refresh = await module.mount(view);
    await refresh();
  } catch (err) {
    fill(container, errorBox(err, "this page"));
  }
  schedule();
}

function drawTools() {
  const signedIn = Boolean(token());
  fill(tools, live, themeButton(), signedIn
    ? h("button.icon.sign-out", { type: "button", title: "Forget the token of this tab", onclick: () => {
      clearToken();
      show(location.pathname);
    } }, "Sign out")
    : null);
}

initTheme();
window.addEventListener("queen:token", drawTools);
drawTools();
onNavigate(show);
show(location.pathname);
