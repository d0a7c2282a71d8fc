"""Per-worker background services and process-wide counters."""
