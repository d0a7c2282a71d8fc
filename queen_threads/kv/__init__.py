"""Key/value state and locks with fencing tokens on PostgreSQL (docs/kv.md): the
operations a request may carry (`ops`, `lock_ops`), their store, and the sweeper of
expired rows."""

from queen_threads.kv import lock_ops, ops
from queen_threads.kv.store import KvStore, LockCounts
from queen_threads.kv.sweeper import KvSweepJob, kv_sweep_service

__all__ = ["KvStore", "KvSweepJob", "LockCounts", "kv_sweep_service", "lock_ops", "ops"]
