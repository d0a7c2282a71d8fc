"""Ephemeral queues (/api/v1/ephemeral/*): bounded rings in UNLOGGED tables, lossy by
contract, configuration kept (docs/ephemeral.md, schema/migrations/0016_ephemeral.sql)."""

from queen_threads.ephemeral.gates import Gates
from queen_threads.ephemeral.service import EphemeralQueues
from queen_threads.ephemeral.store import EphemeralStore

__all__ = ["EphemeralQueues", "EphemeralStore", "Gates"]
