// The one way the page talks to the server: the public HTTP API, with the tab's token.
import { askForToken, token } from "./auth.js";

export const API = "/api/v1";

export class ApiError extends Error {
  constructor(status, message, body = null) {
    super(message);
    this.status = status;
    this.body = body;
  }

  get forbidden() { return this.status === 403; }
  get missing() { return this.status === 404; }
}

/** A path segment (queue, group, ids) made safe for a URL. */
export const seg = encodeURIComponent;

function url(path, query) {
  const target = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") target.searchParams.set(key, value);
  }
  return target;
}

async function errorOf(res) {
  try {
    const body = await res.json();
    return [body && body.error ? body.error : res.statusText, body];
  } catch {
    return [res.statusText || `HTTP ${res.status}`, null];
  }
}

/**
 * request("/api/v1/dlq", {query: {queue}}) -> the parsed JSON (null for 204).
 * 401: asks for a token, then tries again; dismissing the prompt throws ApiError(401).
 * `accept`: more statuses whose body is data rather than an error (e.g. 503 of /health).
 */
export async function request(path, { method = "GET", query, body, accept = [], signal } = {}) {
  for (;;) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const bearer = token();
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    let res;
    try {
      res = await fetch(url(path, query), {
        method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError(0, "The server does not answer (is it running? is the network up?)");
    }
    if (res.status === 401) {
      const [reason] = await errorOf(res);
      try {
        await askForToken(reason);
      } catch {
        throw new ApiError(401, reason);
      }
      continue;
    }
    if (res.ok || accept.includes(res.status)) {
      if (res.status === 204) return null;
      return res.json();
    }
    const [message, data] = await errorOf(res);
    throw new ApiError(res.status, message, data);
  }
}

export const get = (path, query, options = {}) => request(path, { ...options, query });
export const post = (path, body, options = {}) => request(path, { ...options, method: "POST", body });
export const del = (path, query) => request(path, { method: "DELETE", query });
