-- A message's W3C trace context (issue 34, docs/observability.md): what the producer's push
-- carried in its `traceparent` / `tracestate` headers, or per item in its `traceparent` /
-- `tracestate` fields, as {"traceparent": "00-...", "tracestate": "..."} (tracestate only
-- when given). The server checks the traceparent before it gets here (an invalid one is
-- dropped and counted, never stored); every pop path returns the object as the message's
-- `traceContext`, so a consumer continues the producer's trace.
--
-- Not `trace_id`: that column is Queen's own message trace (POST /api/v1/traces), a UUID.
--
-- NULL when the push carried none: a nullable column without a default adds nothing to a
-- row that leaves it NULL (one bit of the null bitmap the row already has), and adding it
-- rewrites no table (PostgreSQL 11+: a new column without a default is metadata only).
ALTER TABLE queen.messages ADD COLUMN trace_context JSONB;
ALTER TABLE queen.ephemeral_messages ADD COLUMN trace_context JSONB;
