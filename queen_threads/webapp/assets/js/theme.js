// Light, dark, or the system's choice (prefers-color-scheme); remembered in localStorage.
import { h } from "./dom.js";

const KEY = "queen.theme";
const MODES = ["auto", "light", "dark"];
const LABELS = { auto: "◐ Auto", light: "☀ Light", dark: "☾ Dark" };

function mode() {
  const saved = localStorage.getItem(KEY);
  return MODES.includes(saved) ? saved : "auto";
}

function apply(value) {
  if (value === "auto") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.dataset.theme = value;
  window.dispatchEvent(new Event("queen:theme"));
}

export function initTheme() {
  apply(mode());
  window.matchMedia("(prefers-color-scheme: dark)")
    .addEventListener("change", () => window.dispatchEvent(new Event("queen:theme")));
}

export function themeButton() {
  const button = h("button.icon", { type: "button", title: "Theme: auto, light or dark" }, LABELS[mode()]);
  button.addEventListener("click", () => {
    const next = MODES[(MODES.indexOf(mode()) + 1) % MODES.length];
    localStorage.setItem(KEY, next);
    apply(next);
    button.textContent = LABELS[next];
  });
  return button;
}

let probe = null;

/** A colour variable of the theme in force, resolved to rgb() for the charts' canvas (the
 *  variables hold light-dark(...), which only an element's computed colour resolves). */
export function cssVar(name) {
  if (!probe) {
    probe = h("span", { "aria-hidden": "true", hidden: true });
    document.body.append(probe);
  }
  probe.style.color = `var(${name})`;
  return getComputedStyle(probe).color;
}
