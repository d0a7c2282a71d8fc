"""Key/value state and locks with fencing tokens on PostgreSQL (docs/kv.md).

routes.py the falcon resources; body.py and lock_body.py the operations a request may
carry; store.py the only caller of `schema/queries/kv.sql`; metrics.py its observer (lock
acquires by outcome); sweeper.py the background job that deletes expired rows.
"""

from queen_threads.kv.store import KvStore, LockCounts
from queen_threads.kv.sweeper import KvSweepJob, kv_sweep_service

__all__ = ["KvStore", "KvSweepJob", "LockCounts", "kv_sweep_service"]
