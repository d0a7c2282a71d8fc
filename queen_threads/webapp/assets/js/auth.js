// The bearer token: kept in sessionStorage (this tab only, gone when it closes), asked
// for when the server answers 401. Concurrent 401s share one prompt; once dismissed, the
// prompt comes back only when asked for (the "Sign in" buttons), not on every refresh.
import { h } from "./dom.js";

const KEY = "queen.token";
let pending = null;
let dismissed = false;

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

function changed() {
  window.dispatchEvent(new Event("queen:token"));
}

export function setToken(value) {
  sessionStorage.setItem(KEY, value);
  changed();
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
  changed();
}

/**
 * Show the token prompt; resolves once a token was entered, rejects when dismissed (at
 * once, without a prompt, after a dismissal unless `force`).
 */
export function askForToken(reason, { force = false } = {}) {
  if (dismissed && !force) return Promise.reject(new Error("No token entered"));
  if (!pending) {
    pending = prompt(reason).then(
      () => { dismissed = false; },
      (err) => { dismissed = true; throw err; },
    ).finally(() => {
      pending = null;
    });
  }
  return pending;
}

function prompt(reason) {
  return new Promise((resolve, reject) => {
    const input = h("textarea#token-input", {
      name: "token", rows: 4, required: true, autocomplete: "off", spellcheck: false,
      placeholder: "eyJhbGciOi…", "aria-label": "Bearer token",
    });
    const cancel = h("button", { type: "button" }, "Cancel");
    const dialog = h("dialog.token-dialog", { "aria-labelledby": "token-title" },
      h("form", { method: "dialog" },
        h("h2#token-title", "Sign in with a token"),
        h("p", "This server requires a JWT. Paste a bearer token: it is kept for this tab only ",
          "and sent as ", h("code", "Authorization: Bearer …"), " with every API call."),
        reason ? h("p.notice.warn", `The server said: ${reason}`) : null,
        input,
        h("div.actions", cancel, h("button.primary", { type: "submit" }, "Sign in"))));
    let entered = false;
    dialog.querySelector("form").addEventListener("submit", () => {
      const value = input.value.trim().replace(/^bearer\s+/i, "");
      if (value) {
        entered = true;
        setToken(value);
      }
    });
    cancel.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (entered) resolve();
      else reject(new Error("No token entered"));
    });
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
}
