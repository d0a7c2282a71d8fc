// Numbers, times and durations as people read them.

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function num(value) {
  if (value === null || value === undefined || Number.isNaN(Number(value))) return "–";
  const n = Number(value);
  return Number.isInteger(n) ? integer.format(n) : decimal.format(n);
}

export function rate(perSecond) {
  if (perSecond === null || perSecond === undefined) return "–";
  const n = Number(perSecond);
  if (n === 0) return "0/s";
  if (n < 1) return `${decimal.format(n * 60)}/min`;
  return `${decimal.format(n)}/s`;
}

/** Seconds as "45 s", "3 min", "2 h 5 min", "4 d". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Math.round(Number(seconds)));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return `${Math.floor(s / 3600)} h${m ? ` ${m} min` : ""}`;
  }
  return `${Math.floor(s / 86400)} d`;
}

export function secondsSince(iso) {
  return iso ? (Date.now() - Date.parse(iso)) / 1000 : null;
}

/** "3 min ago" for an ISO time (future times: "in 3 min"). */
export function ago(iso) {
  if (!iso) return "–";
  const s = secondsSince(iso);
  if (Math.abs(s) < 5) return "just now";
  return s >= 0 ? `${duration(s)} ago` : `in ${duration(-s)}`;
}

const timeFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "short", day: "2-digit",
  hour: "2-digit", minute: "2-digit", second: "2-digit",
});

export function time(iso) {
  return iso ? timeFormat.format(new Date(iso)) : "–";
}

export function bytesKb(kb) {
  if (kb === null || kb === undefined) return "–";
  const mb = Number(kb) / 1024;
  return mb >= 1024 ? `${decimal.format(mb / 1024)} GB` : `${decimal.format(mb)} MB`;
}

/** A <input type="datetime-local"> value (local time) as an ISO-8601 UTC string. */
export function localInputToIso(value) {
  return value ? new Date(value).toISOString() : "";
}

/** An ISO time as a <input type="datetime-local"> value (local time). */
export function isoToLocalInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}
