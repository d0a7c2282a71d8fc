"""`scripts/bench`: the benchmark suite of queen-threads (see docs/benchmarks.md).

A light asyncio load generator (raw keep-alive HTTP/1.1 connections) drives a running
server, or one it starts itself (embedded PostgreSQL + the real gunicorn server), through
scenarios (a)-(f) of issue 6 and (h), idle long polls on one hot queue, and reports
medians, spreads and where the CPU went.

A checkout-only tool, kept outside the `queen_threads` package so that the server's wheel
does not ship it; `scripts/bench` runs it as `python -m bench` from the repository root.
"""
