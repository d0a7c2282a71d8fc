"""Pops, long polls and the wake-ups that end them (LISTEN/NOTIFY, peers)."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.settings.parsers import (
    boolean,
    choice,
    csv_list,
    env,
    integer,
    number,
    secret,
    text,
)

SUBSCRIPTION_MODES = ("", "all", "from_beginning", "new", "new-only")


@dataclass(frozen=True)
class PollingSettings:
    """Pop defaults, the long-poll workers and their backoff, wake-ups between instances."""

    # --- Pop and long polling ---------------------------------------------------------
    default_timeout_ms: int = env(
        "DEFAULT_TIMEOUT", 30000, integer(0), "Pop `timeout` when the request has none, ms."
    )
    max_timeout_ms: int = env(
        "MAX_TIMEOUT",
        60000,
        integer(1),
        "Longest long-poll wait; larger `timeout`s are clamped, ms.",
    )
    default_batch_size: int = env(
        "DEFAULT_BATCH_SIZE", 1, integer(1, 10000), "Pop `batch` when the request has none."
    )
    default_subscription_mode: str = env(
        "DEFAULT_SUBSCRIPTION_MODE",
        "",
        choice(*SUBSCRIPTION_MODES),
        "Subscription mode of a new consumer group that sends none ('' = all).",
    )
    poll_worker_count: int = env(
        "POLL_WORKER_COUNT", 2, integer(1, 64), "Poll-worker greenlets per worker process."
    )
    poll_worker_interval_ms: int = env(
        "POLL_WORKER_INTERVAL", 50, integer(1), "Longest sleep of an idle poll worker, ms."
    )
    poll_db_interval_ms: int = env(
        "POLL_DB_INTERVAL", 100, integer(1), "Base (reset) interval between a group's queries, ms."
    )
    poll_linger_max_ms: int = env(
        "POLL_LINGER_MAX_MS",
        20,
        integer(0, 1000),
        "Longest a message of a busy partition waits for more before its long poll is answered"
        " (batches under load; 0: off; an idle queue's message never waits), ms.",
    )
    queue_max_poll_interval_ms: int = env(
        "QUEUE_MAX_POLL_INTERVAL", 2000, integer(1), "Cap of a group's backoff interval, ms."
    )
    queue_backoff_threshold: int = env(
        "QUEUE_BACKOFF_THRESHOLD", 1, integer(1), "Empty rounds before a group's interval grows."
    )
    queue_backoff_multiplier: float = env(
        "QUEUE_BACKOFF_MULTIPLIER", 2.0, number(1.0), "Growth factor of the backoff interval."
    )
    queue_backoff_cleanup_threshold_s: int = env(
        "QUEUE_BACKOFF_CLEANUP_THRESHOLD",
        3600,
        integer(1),
        "Drop backoff states idle this long, s.",
    )
    max_poll_intentions: int = env(
        "MAX_POLL_INTENTIONS",
        10000,
        integer(1),
        "Waiting long polls per worker process; beyond it a long poll gets 503 + Retry-After.",
    )

    # --- Peers (wake-ups between instances besides LISTEN/NOTIFY) ------------------------
    listen_notify: bool = env(
        "QUEEN_LISTEN_NOTIFY",
        True,
        boolean,
        "Wake long polls through PostgreSQL LISTEN/NOTIFY (on the DATABASE_DIRECT_URL).",
    )
    peers: tuple[str, ...] = env(
        "QUEEN_PEERS", (), csv_list, "Comma list of peer base URLs notified over HTTP on push/ack."
    )
    udp_peers: tuple[str, ...] = env(
        "QUEEN_UDP_PEERS", (), csv_list, "Comma list of host[:port] peers notified over UDP."
    )
    udp_notify_port: int = env(
        "QUEEN_UDP_NOTIFY_PORT", 6633, integer(1, 65535), "UDP port to receive (and default send)."
    )
    peer_notify_batch_ms: int = env(
        "PEER_NOTIFY_BATCH_MS",
        10,
        integer(0, 1000),
        "Window in which peer notifications batch, ms.",
    )
    peer_secret: str = env(
        "QUEEN_PEER_SECRET",
        "",
        secret,
        "Shared secret of the peers (HTTP header, UDP HMAC key); others are dropped. Unset: open.",
    )
    udp_bind: str = env(
        "QUEEN_UDP_BIND",
        "127.0.0.1",
        text,
        "Address the UDP notification receiver binds (0.0.0.0: every interface).",
    )
