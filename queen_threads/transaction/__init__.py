"""POST /api/v1/transaction: the queue core's pushes and acks with kv and timers riders,
in one PostgreSQL transaction. Above queue/, kv/ and timers/, whose rules it combines."""
