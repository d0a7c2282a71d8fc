"""Command-line options of `scripts/bench` and the sizes of each scenario (full or --quick)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

SCENARIOS = (
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r",
    "s", "t", "u", "v", "w", "x", "y", "z",
)  # fmt: skip
# On request only: (i) starts 2 servers, (j) fills the database with a week of analytics,
# (k) and (l) (streams) and (t) (timers) take a minute or more each; (m) key/value and locks;
# (p) (pop autopilot) about eight minutes a run; (s) needs the official client (the
# streaming SDK, a test extra); (w) retry lateness; (n) partitions scaling (fills 56,000
# partitions per way of popping); (x) mixed load (a few minutes); (y) its 10-minute memory run;
# (z) Citus against plain PostgreSQL 15 (starts a local Citus cluster and a PostgreSQL 15);
# (v) Citus with 1 and 2 workers under the same CPU quota per node (cgroups, as root);
# (q) SQL cost per call of push, pop and ack (starts a PostgreSQL of its own);
# (o) Queen's SQL API against the HTTP push (needs the server's database).
DEFAULT_SCENARIOS = ("a", "b", "c", "d", "e", "f", "g", "h")
# (z)'s operations: pushes of 1 and 1000 messages, pops of 100 + ack (of the queue, of a
# named partition), three SQL probes
SCALE_OPS = (
    "push1", "push1000", "popack100", "popack100p", "sql_insert", "sql_call", "sql_call1000",
)  # fmt: skip


@dataclass(frozen=True)
class Sizes:
    runs: int = 3
    warmup_s: float = 2.0
    duration_s: float = 10.0
    push_batch: int = 1000
    push_partitions: int = 1  # (a)/(b): connection i pushes to partition i % n ("Default" if 1)
    push_clients: tuple[int, ...] = (1, 4)
    single_connections: tuple[int, ...] = (16, 64)
    consume_messages: int = 20_000
    consume_partitions: int = 10
    consumers: int = 4
    pop_batch: int = 100
    latency_reps: int = 50
    latency_max_prewait_s: float = 2.0
    idle_polls: int = 10_000
    idle_queues: int = 100
    idle_hold_s: float = 20.0
    idle_ramp_per_s: float = 2000.0
    fanout_messages: int = 10_000
    fanout_groups: int = 10
    payload_bytes: int = 64
    e2e_rate: float = 1000.0  # (g): total msg/s of the main window
    e2e_duration_s: float = 60.0
    e2e_producers: int = 8  # producer i pushes to partition p{i}
    e2e_consumers: int = 8
    e2e_batch: int = 10
    e2e_step_s: float = 15.0  # each rate of the search for the highest rate with p99 <= limit
    e2e_step_limit_ms: float = 100.0
    e2e_max_steps: int = 20
    ceiling_queue_rows: int = 300_000  # rows the SKIP LOCKED ceiling may drain
    analytics_queues: int = 100  # (j): queues with a synthetic history
    analytics_days: int = 7  # (j): days of minutes each
    analytics_reps: int = 50  # (j): requests per chart and run
    stream_rate: float = 5000.0  # (k): msg/s into the stream's queue
    stream_batch: int = 50  # (k): messages per push request
    stream_producers: int = 10  # (k): producer connections, each on its own clock
    stream_consumers: int = 2  # (k): long-polling consumers of the one group
    stream_duration_s: float = 35.0  # (k): production time (>= 30 full 1 s windows)
    stream_idle_polls: int = 1000  # (l): waiting stream polls
    stream_idle_streams: int = 10  # (l): streams (one queue each)
    stream_idle_groups: int = 10  # (l): consumer groups per stream
    stream_idle_s: float = 30.0  # (l): measured window
    kv_connections: int = 16  # (m): connections of the put/get and transaction windows
    kv_keys: int = 1000  # (m): keys per connection the puts cycle over
    lock_reps: int = 200  # (m): acquire + release round trips, one after another
    timer_count: int = 10_000  # (t): timers scheduled
    timer_spread_s: float = 60.0  # (t): they are due within this window...
    timer_lead_s: float = 5.0  # (t): ...which opens this long after scheduling starts
    timer_batch: int = 100  # (t): timers per POST /api/v1/timers
    timer_schedulers: int = 4  # (t): scheduling connections
    timer_consumers: int = 4  # (t): long-polling consumers (autoAck)
    sdk_messages: int = 20_000  # (s): source messages through the SDK's pipeline (and raw)
    sdk_partitions: int = 10  # (s): source partitions
    sdk_batch: int = 200  # (s): the SDK's pop batch (its default)
    sdk_pop_partitions: int = 4  # (s): partitions per pop (the SDK's default)
    reads_partitions: int = 1000  # (r): partitions one fetch reads
    reads_records: int = 3  # (r): records in each
    reads_reps: int = 50  # (r): fetches per run
    eph_messages: int = 20_000  # (u): messages pushed then popped, per kind
    eph_batch: int = 100  # (u): messages per push and per pop
    due_queues: int = 10  # (w): queues, one consumer each
    due_rounds: int = 50  # (w): failed acks (retries) per queue
    due_delay_ms: int = 200  # (w): retryDelay
    autopilot_messages: int = 100_000  # (p) backlog: prefilled messages
    autopilot_partitions: int = 100  # (p) backlog: over this many partitions
    autopilot_consumers: int = 4  # (p): consumers of both phases
    autopilot_drain_limit_s: float = 45.0  # (p) backlog: a slower drain stops here
    # (p): the fixed (batch, partitions) settings beside the autopilot and the defaults (1, 1)
    autopilot_fixed: tuple[tuple[int, int], ...] = ((100, 1), (1000, 1), (100, 10), (1000, 10))
    autopilot_only: tuple[str, ...] = ()  # (p): these configurations and phases (empty: all)
    trickle_rate: float = 500.0  # (p) trickle: msg/s, single-message pushes
    trickle_duration_s: float = 20.0  # (p) trickle: production time per configuration
    trickle_settle_s: float = 15.0  # (p) trickle: the consumers' time to catch up after it
    trickle_partitions: int = 20  # (p) trickle: push k goes to partition k mod n
    trickle_producers: int = 5  # (p) trickle: producers, each on its own clock
    scaling_partitions: tuple[int, ...] = (10, 1000, 5000, 50_000)  # (n): queue sizes
    scaling_cycles: int = 300  # (n): timed pop + ack cycles per size and mode
    scaling_max_s: float = 90.0  # (n): a size's cycles stop after this long (>= 20 cycles)
    scaling_modes: tuple[str, ...] = ("queue", "group", "namespace")  # (n): ways of popping
    scaling_fill_batch: int = 1000  # (n): partitions (1 message each) per fill request
    scaling_analyze: bool = False  # (n): ANALYZE the queue tables after each fill
    mixed_rates: tuple[float, ...] = (600.0, 800.0, 1000.0, 1200.0, 1400.0)  # (x): msg/s asked
    mixed_step_s: float = 25.0  # (x): production time per rate
    mixed_producers: int = 8  # (x): one keep-alive connection each, producer i -> partition i
    mixed_consumers: int = 8  # (x): long-polling consumers
    mixed_batch: int = 10  # (x): the consumers' pop batch
    mixed_p99_limit_ms: float = 50.0  # (x): the headline's latency bound
    mixed_idle_partitions: int = 0  # (x): partitions of another queue in the database first
    mixed_other_url: str | None = None  # (x): also this server, step by step (e.g. the original)
    mixed_other_database_url: str | None = None  # (x): its database (PostgreSQL's CPU)
    mixed_baseline: bool = False  # (x): --baseline's server is a side of every step too
    mixed_long_rate: float = 800.0  # (y): msg/s asked
    mixed_long_s: float = 600.0  # (y): production time
    mixed_long_edge_s: float = 60.0  # (y): memory averaged over the first and last this long
    scale_partitions: int = 8  # (z): partitions the pushes and pops spread over (both workers)
    scale_single_connections: int = 8  # (z): connections of the 1-message push
    scale_batch_clients: int = 2  # (z): connections of the 1000-message push
    scale_consumers: int = 4  # (z): pop + ack consumers
    scale_prefill: int = 20_000  # (z): messages in the pop + ack queue (it may drain early)
    scale_count_requests: int = 20  # (z): requests sent one by one with remote-command logging
    scale_ops: tuple[str, ...] = ()  # (z): only these operations (empty: all)
    capacity_cpu: float = 0.25  # (v): each node's CPU quota, a fraction of a core
    capacity_prefill: int = 60_000  # (v): messages in the pop + ack queue
    sqlcost_calls: int = 200  # (q): timed pushes of each kind per round (pops: a quarter)
    sqlcost_count_calls: int = 10  # (q): calls of each kind counted by pg_stat_statements
    sqlcost_partitions: int = 10_000  # (q): partitions added for the large size
    sqlcost_rounds: int = 6  # (q): rounds per size (the sides alternate which goes first)
    sqlcost_baseline: str | None = None  # (q): another checkout, measured beside this one
    sqlapi_calls: int = 600  # (o): calls of each single kind (in blocks of 20)
    sqlapi_batch: int = 1000  # (o): items of a produce, and of the batched push
    sqlapi_batch_calls: int = 40  # (o): calls of each batch kind


FULL = Sizes()
QUICK = Sizes(
    runs=1,
    sqlapi_calls=120,
    sqlapi_batch_calls=8,
    warmup_s=0.5,
    duration_s=3.0,
    consume_messages=10_000,
    latency_reps=10,
    idle_polls=1_000,
    idle_queues=10,
    idle_hold_s=10.0,
    fanout_messages=3_000,
    e2e_duration_s=10.0,
    e2e_step_s=5.0,
    ceiling_queue_rows=60_000,
    analytics_days=1,
    analytics_reps=10,
    stream_duration_s=8.0,
    stream_idle_s=8.0,
    lock_reps=50,
    timer_count=1_000,
    timer_spread_s=10.0,
    timer_lead_s=3.0,
    sdk_messages=4_000,
    reads_reps=10,
    eph_messages=5_000,
    due_queues=4,
    due_rounds=10,
    autopilot_messages=10_000,
    autopilot_drain_limit_s=8.0,
    trickle_duration_s=5.0,
    trickle_settle_s=5.0,
    scaling_partitions=(10, 1000),
    scaling_cycles=50,
    scaling_max_s=20.0,
    mixed_rates=(300.0, 600.0),
    mixed_step_s=5.0,
    mixed_long_rate=300.0,
    mixed_long_s=30.0,
    mixed_long_edge_s=10.0,
    scale_prefill=5_000,
    scale_count_requests=5,
    capacity_prefill=20_000,
    sqlcost_calls=120,
    sqlcost_count_calls=5,
    sqlcost_rounds=2,
)


@dataclass(frozen=True)
class Options:
    url: str | None
    workers: int
    scenarios: tuple[str, ...]
    quick: bool
    sizes: Sizes
    json_path: str | None
    seed: int
    database_url: str | None
    server_pid: int | None
    pg_pid: int | None
    server_env: tuple[tuple[str, str], ...]
    server_log_level: str
    profile: tuple[str, ...]
    profile_dir: str
    profile_native: bool
    quiet_wait_s: float
    quiet_limit: float
    ceilings: bool
    keep: bool
    argv: tuple[str, ...]
    original_run: str | None = None  # (x): start the original server from this run script
    baseline: str | None = None  # another checkout, measured beside this one
    cpu_profile: str | None = None  # the started server's CPU-time stacks go to this folder

    @property
    def start_server(self) -> bool:
        return self.url is None


def _scenarios(text: str) -> tuple[str, ...]:
    picked = tuple(dict.fromkeys(s.strip().lower() for s in text.split(",") if s.strip()))
    unknown = [s for s in picked if s not in SCENARIOS]
    if unknown or not picked:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown) or '(none)'}; pick from {','.join(SCENARIOS)}"
        )
    return picked


def _profile(text: str) -> tuple[str, ...]:
    return _scenarios(text) if text else ()


def _names(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))


def _sizes(text: str) -> tuple[int, ...]:
    values = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected a comma list of counts >= 1, got {text!r}")
    return values


def _rates(text: str) -> tuple[float, ...]:
    values = tuple(float(x) for x in text.split(",") if x.strip())
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected a comma list of rates > 0, got {text!r}")
    return values


def _modes(text: str) -> tuple[str, ...]:
    known = Sizes().scaling_modes
    picked = _names(text)
    if not picked or any(m not in known for m in picked):
        raise argparse.ArgumentTypeError(f"pick from {','.join(known)}, got {text!r}")
    return picked


def _scale_ops(text: str) -> tuple[str, ...]:
    picked = _names(text)
    if not picked or any(op not in SCALE_OPS for op in picked):
        raise argparse.ArgumentTypeError(f"pick from {','.join(SCALE_OPS)}, got {text!r}")
    return picked


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not key.replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/bench",
        description=(
            "Benchmark queen-threads: scenarios (a)-(f) of issue 6, (g) end-to-end latency,"
            " (h) idle long polls on one hot queue, (i) auth off/on, (j) the dashboard's chart"
            " queries over a week of analytics, (k) stream window latency, (l) idle stream"
            " polls, (p) pop autopilot against fixed settings, (t) timer fire lateness, (w) retry"
            " redelivery lateness; each throughput figure beside its in-run ceiling"
            " (docs/benchmarks.md)."
        ),
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--url", help="benchmark this running server (e.g. http://127.0.0.1:6632)")
    target.add_argument(
        "--start",
        action="store_true",
        help="start an embedded PostgreSQL and the gunicorn server (default without --url)",
    )
    p.add_argument("--workers", type=_positive_int, default=2, help="NUM_WORKERS (with --start)")
    p.add_argument(
        "--scenarios",
        type=_scenarios,
        default=DEFAULT_SCENARIOS,
        help="comma list of a,b,c,d,e,f,g,h,i,j,k,l,m,n,p,q,r,s,t,u,w,x,y,z (default: all but i,"
        " which starts a second server, j, which fills the database with a week of analytics, the"
        " streams scenarios k and l, m, key/value and locks, p, the pop autopilot's comparison,"
        " r, reads by offset, s, the streaming SDK, t, timers, u, ephemeral queues, w,"
        " retry redelivery lateness, n, partitions scaling, x, mixed load, and y, mixed load"
        " for 10 minutes with the server's memory, z, Citus against plain PostgreSQL 15, and q,"
        " the SQL cost per call of push, pop and ack)",
    )
    p.add_argument(
        "--ceilings",
        action=argparse.BooleanOptionalAction,
        help="measure the in-run ceilings (bare HTTP app, raw psycopg2) before the scenarios"
        " (default: on, off with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes, 1 run (under 2 minutes)")
    p.add_argument("--json", dest="json_path", help="write every raw number to this file")
    p.add_argument("--runs", type=_positive_int, help="runs per scenario (default 3, quick 1)")
    p.add_argument("--duration", type=_positive_float, help="seconds per push measurement")
    p.add_argument("--idle-polls", type=_positive_int, help="long polls held in (e)")
    p.add_argument("--idle-queues", type=_positive_int, help="queues the (e) polls spread over")
    p.add_argument("--idle-hold", type=_positive_float, help="seconds the (e) polls wait")
    p.add_argument(
        "--push-partitions",
        type=_positive_int,
        help="(a)/(b): spread the connections over this many partitions (default 1: Default)",
    )
    p.add_argument("--latency-reps", type=_positive_int, help="repetitions of (d)")
    p.add_argument("--e2e-rate", type=_positive_float, help="(g): msg/s of the main window (1000)")
    p.add_argument(
        "--e2e-duration", type=_positive_float, help="(g): main window, s (60, quick 10)"
    )
    p.add_argument("--timer-count", type=_positive_int, help="(t): timers (10000, quick 1000)")
    p.add_argument(
        "--timer-spread", type=_positive_float, help="(t): due within this many s (60, quick 10)"
    )
    p.add_argument(
        "--backlog-messages", type=_positive_int, help="(p): the backlog's messages (100,000)"
    )
    p.add_argument(
        "--trickle-duration", type=_positive_float, help="(p): the trickle's window, s (20)"
    )
    p.add_argument(
        "--autopilot-only",
        type=_names,
        help="(p): only these phases (backlog, trickle) and/or configurations (autopilot,"
        " defaults, b100_p1, b1000_p1, b100_p10, b1000_p10), comma list (default: all)",
    )
    p.add_argument(
        "--scaling-partitions",
        type=_sizes,
        help="(n): partition counts, comma list (10,1000,5000,50000; quick 10,1000)",
    )
    p.add_argument(
        "--scaling-cycles", type=_positive_int, help="(n): timed cycles per size (300, quick 50)"
    )
    p.add_argument(
        "--scaling-modes", type=_modes, help="(n): comma list of queue,group,namespace (all)"
    )
    p.add_argument(
        "--scaling-analyze",
        action="store_true",
        default=None,
        help="(n): ANALYZE the queue tables after each fill (fresh plans; needs the database)",
    )
    p.add_argument(
        "--mixed-rates",
        type=_rates,
        help="(x): msg/s asked of the producers, comma list (600,800,1000,1200,1400)",
    )
    p.add_argument("--mixed-step", type=_positive_float, help="(x): seconds per rate (25)")
    p.add_argument(
        "--mixed-idle-partitions",
        type=int,
        help="(x): first create this many partitions (one message each) of another queue, as"
        " a database with other customers' partitions has (0)",
    )
    p.add_argument(
        "--mixed-other-url",
        help="(x): run each step against this server too, right after (e.g. the original"
        " Queen), so both are measured in one run",
    )
    p.add_argument(
        "--mixed-other-database-url", help="(x): the other server's database (its CPU figures)"
    )
    p.add_argument("--mixed-long-rate", type=_positive_float, help="(y): msg/s asked (800)")
    p.add_argument("--mixed-long-duration", type=_positive_float, help="(y): seconds of load (600)")
    p.add_argument(
        "--scale-ops",
        type=_scale_ops,
        help="(z): only these operations, comma list of push1,push1000,popack100,popack100p,"
        "sql_insert,sql_call,sql_call1000 (default: all)",
    )
    p.add_argument(
        "--scale-prefill",
        type=_positive_int,
        help="(z): messages in the pop + ack queue of each side (20,000, quick 5,000)",
    )
    p.add_argument(
        "--capacity-cpu",
        type=_positive_float,
        help="(v): each node's CPU quota, a fraction of a core (0.25)",
    )
    p.add_argument(
        "--capacity-prefill",
        type=_positive_int,
        help="(v): messages in the pop + ack queue of each configuration (60,000, quick 20,000)",
    )
    p.add_argument(
        "--sqlcost-baseline",
        help="(q): a checkout of another revision (e.g. `git worktree add /tmp/base main`),"
        " migrated into a database of its own and measured beside this one, alternating",
    )
    p.add_argument(
        "--sqlcost-calls", type=_positive_int, help="(q): timed pushes per kind and round (200)"
    )
    p.add_argument(
        "--sqlcost-partitions",
        type=_positive_int,
        help="(q): partitions of another queue added for the large size (10,000)",
    )
    p.add_argument("--seed", type=int, default=6, help="random seed (pre-waits of (d))")
    p.add_argument(
        "--database-url", help="with --url: the server's database, for version and settings"
    )
    p.add_argument("--server-pid", type=int, help="with --url: the server's master pid")
    p.add_argument("--pg-pid", type=int, help="with --url: the PostgreSQL postmaster pid")
    p.add_argument(
        "--server-env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the started server (repeatable)",
    )
    p.add_argument(
        "--server-log-level", default="warn", help="LOG_LEVEL of the started server (warn)"
    )
    p.add_argument(
        "--profile",
        type=_profile,
        default=(),
        help="after the measured runs, one extra run of these scenarios under py-spy",
    )
    p.add_argument("--profile-dir", default="bench-profiles", help="where py-spy output goes")
    p.add_argument(
        "--profile-native",
        action="store_true",
        help="py-spy --native: C frames and syscalls too (pauses the workers, heavy)",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        help="before each run, wait up to this many seconds for other processes on the machine"
        " to use less than --quiet-limit CPU (default 60, quick 0)",
    )
    p.add_argument(
        "--quiet-limit",
        type=float,
        default=25.0,
        help="CPU (%% of one core) of other processes that counts as quiet (25)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary data folder")
    p.add_argument(
        "--cpu-profile",
        metavar="DIR",
        help="sample the started server's workers by CPU time (SIGPROF, bench/cpu_profile_conf.py)"
        " over the whole run; their stacks go to DIR and a summary to the report",
    )
    p.add_argument(
        "--baseline",
        metavar="DIR",
        help="also start the server of the checkout at DIR (e.g. a `git worktree` of the"
        " commit before a change) on a database of its own of the same PostgreSQL, and run"
        " every run of every scenario against both, the side that goes first alternating"
        " ((x): step by step); not with --url",
    )
    p.add_argument(
        "--original",
        nargs="?",
        const="",
        default=None,
        metavar="RUN",
        help="(x): start the original Queen server (its run script, default"
        " ../shared/original/run) on a fresh database of the same PostgreSQL and run every"
        " step against it too, the sides alternating",
    )
    return p


def parse_args(argv: list[str]) -> Options:
    parser = build_parser()
    ns = parser.parse_args(argv)
    sizes = QUICK if ns.quick else FULL
    overrides: dict[str, object] = {}
    for flag, name in (
        ("runs", "runs"),
        ("duration", "duration_s"),
        ("idle_polls", "idle_polls"),
        ("idle_queues", "idle_queues"),
        ("idle_hold", "idle_hold_s"),
        ("latency_reps", "latency_reps"),
        ("push_partitions", "push_partitions"),
        ("e2e_rate", "e2e_rate"),
        ("e2e_duration", "e2e_duration_s"),
        ("timer_count", "timer_count"),
        ("timer_spread", "timer_spread_s"),
        ("backlog_messages", "autopilot_messages"),
        ("trickle_duration", "trickle_duration_s"),
        ("autopilot_only", "autopilot_only"),
        ("scaling_partitions", "scaling_partitions"),
        ("scaling_cycles", "scaling_cycles"),
        ("scaling_modes", "scaling_modes"),
        ("scaling_analyze", "scaling_analyze"),
        ("mixed_rates", "mixed_rates"),
        ("mixed_step", "mixed_step_s"),
        ("mixed_idle_partitions", "mixed_idle_partitions"),
        ("mixed_other_url", "mixed_other_url"),
        ("mixed_other_database_url", "mixed_other_database_url"),
        ("mixed_long_rate", "mixed_long_rate"),
        ("mixed_long_duration", "mixed_long_s"),
        ("scale_ops", "scale_ops"),
        ("scale_prefill", "scale_prefill"),
        ("capacity_cpu", "capacity_cpu"),
        ("capacity_prefill", "capacity_prefill"),
        ("sqlcost_baseline", "sqlcost_baseline"),
        ("sqlcost_calls", "sqlcost_calls"),
        ("sqlcost_partitions", "sqlcost_partitions"),
    ):
        value = getattr(ns, flag)
        if value is not None:
            overrides[name] = value
    sizes = replace(sizes, **overrides)  # type: ignore[arg-type]
    if ns.url is None and (ns.server_pid or ns.pg_pid or ns.database_url):
        parser.error("--server-pid, --pg-pid and --database-url go with --url")
    if ns.url is not None and ns.cpu_profile:
        parser.error("--cpu-profile samples the server the bench starts: not with --url")
    if ns.url is not None and ns.baseline:
        parser.error("--baseline starts both servers itself: not with --url")
    return Options(
        url=ns.url.rstrip("/") if ns.url else None,
        workers=ns.workers,
        scenarios=ns.scenarios,
        quick=ns.quick,
        sizes=sizes,
        json_path=ns.json_path,
        seed=ns.seed,
        database_url=ns.database_url,
        server_pid=ns.server_pid,
        pg_pid=ns.pg_pid,
        server_env=tuple(ns.server_env),
        server_log_level=ns.server_log_level,
        profile=ns.profile,
        profile_dir=ns.profile_dir,
        profile_native=ns.profile_native,
        quiet_wait_s=ns.quiet_wait if ns.quiet_wait is not None else (0.0 if ns.quick else 60.0),
        quiet_limit=ns.quiet_limit,
        ceilings=ns.ceilings if ns.ceilings is not None else not ns.quick,
        keep=ns.keep,
        argv=tuple(argv),
        original_run=ns.original,
        baseline=ns.baseline,
        cpu_profile=ns.cpu_profile,
    )
