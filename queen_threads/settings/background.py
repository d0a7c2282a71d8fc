"""The background services: retention, eviction, partition cleanup, the failover buffer."""

from __future__ import annotations

from dataclasses import dataclass

from queen_threads.settings.parsers import env, integer, text


@dataclass(frozen=True)
class BackgroundSettings:
    """Periodic services and the failover file buffer."""

    # --- Retention, eviction -----------------------------------------------------------
    retention_interval_ms: int = env(
        "RETENTION_INTERVAL", 300000, integer(100), "Period of the retention service, ms."
    )
    retention_batch_size: int = env(
        "RETENTION_BATCH_SIZE",
        1000,
        integer(1, 100000),
        "Messages (and partitions) per retention batch: one statement and transaction each.",
    )
    eviction_interval_ms: int = env(
        "EVICTION_INTERVAL",
        60000,
        integer(100),
        "Period of the maxWaitTimeSeconds eviction and of the ephemeral queues' retention "
        "(ttlSeconds, idle groups, their metrics), ms.",
    )
    eviction_batch_size: int = env(
        "EVICTION_BATCH_SIZE", 1000, integer(1, 100000), "Messages per eviction batch."
    )
    kv_sweep_interval_ms: int = env(
        "KV_SWEEP_INTERVAL",
        10000,
        integer(100),
        "Period of the key/value sweeper (deletes expired keys and lock permits), ms.",
    )
    kv_sweep_batch_size: int = env(
        "KV_SWEEP_BATCH_SIZE",
        1000,
        integer(1, 100000),
        "Expired key/value rows per sweeper batch: one statement and transaction each.",
    )
    partition_cleanup_days: int = env(
        "PARTITION_CLEANUP_DAYS",
        30,
        integer(0),
        "Delete empty partitions with no push for this many days (0: never).",
    )

    # --- Failover file buffer ----------------------------------------------------------
    file_buffer_dir: str = env(
        "FILE_BUFFER_DIR",
        ".queen-data/buffers",
        text,
        "Folder of the failover buffer files (relative: to the working directory).",
    )
    file_buffer_flush_ms: int = env(
        "FILE_BUFFER_FLUSH_MS",
        100,
        integer(1),
        "Replay poll interval while buffer files exist, ms.",
    )
    file_buffer_max_batch: int = env(
        "FILE_BUFFER_MAX_BATCH", 100, integer(1, 10000), "Buffered events per replay push."
    )
    file_buffer_events_per_file: int = env(
        "FILE_BUFFER_EVENTS_PER_FILE",
        10000,
        integer(1),
        "Events after which a buffer file rotates.",
    )
