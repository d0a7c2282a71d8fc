// The per-minute series behind the overview's charts. They come from the analytics routes
// (GET /api/v1/status/analytics, /api/v1/analytics/*); on a server without them (404) the
// pushed and dead-lettered counts come from GET /api/v1/status, which has them per
// bucket, and the other charts say that analytics are not available.
import { API, ApiError, get } from "./api.js";

const RETRY_MISSING_MS = 60000;
const missingSince = new Map();

/** The route's answer, or null when the server has no such route (remembered a minute). */
export async function optional(path, query) {
  const since = missingSince.get(path);
  if (since && Date.now() - since < RETRY_MISSING_MS) return null;
  try {
    const body = await get(path, query);
    missingSince.delete(path);
    return body;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && err.message.startsWith("Not found: ")) {
      missingSince.set(path, Date.now());
      return null;
    }
    throw err;
  }
}

export const RANGES = [
  ["15m", "15 min", 15 * 60],
  ["1h", "1 hour", 3600],
  ["6h", "6 hours", 6 * 3600],
  ["24h", "24 hours", 24 * 3600],
  ["7d", "7 days", 7 * 86400],
];

export function rangeSeconds(key) {
  const found = RANGES.find(([k]) => k === key);
  return found ? found[2] : 3600;
}

const seconds = (iso) => Date.parse(iso) / 1000;

/** Every bucket start from `from` to `to` (seconds), with `values(ts)` filled in. */
function buckets(fromS, toS, step, values) {
  const xs = [];
  for (let t = Math.floor(fromS / step) * step; t < toS; t += step) xs.push(t);
  return [xs, xs.map((t) => values.get(t) || 0)];
}

const STATUS_STEP = { minute: 60, hour: 3600, day: 86400 };

/**
 * {source, step, xs, pushed, popped, acked, failed, dlq, longPollWaits, depth}: arrays per
 * bucket, or null for what this server cannot say.
 */
export async function flow({ range, queue }) {
  const to = new Date();
  const from = new Date(to.getTime() - rangeSeconds(range) * 1000);
  const query = { from: from.toISOString(), to: to.toISOString(), queue };
  const body = await optional(`${API}/status/analytics`, query);
  if (body) {
    const points = body.series || [];
    const pick = (key) => points.map((p) => p[key] ?? 0);
    return {
      source: "analytics", step: body.intervalSeconds, xs: points.map((p) => seconds(p.t)),
      pushed: pick("pushed"), popped: pick("popped"), acked: pick("acked"),
      failed: pick("failed"), dlq: pick("dlq"), longPollWaits: pick("longPollWaits"),
      depth: points.map((p) => p.depth ?? null), latest: body.latest || null,
    };
  }
  const status = await get(`${API}/status`, query);
  const step = STATUS_STEP[status.throughput.bucket] || 60;
  const byTime = (key) => new Map(status.throughput.series.map((p) => [seconds(p.timestamp), p[key]]));
  const [xs, pushed] = buckets(from / 1000, to / 1000, step, byTime("ingested"));
  const [, dlq] = buckets(from / 1000, to / 1000, step, byTime("deadLettered"));
  return {
    source: "status", step, xs, pushed, dlq,
    popped: null, acked: null, failed: null, longPollWaits: null, depth: null, latest: null,
  };
}
