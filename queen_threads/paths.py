"""Where the non-Python parts of the project live (the repository's top-level folders)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "schema"
MIGRATIONS_DIR = SCHEMA_DIR / "migrations"
FUNCTIONS_DIR = SCHEMA_DIR / "functions"
CITUS_DIR = SCHEMA_DIR / "citus"  # run only on a Citus coordinator (migrate.py)
QUERIES_FILE = SCHEMA_DIR / "queries.sql"
GUNICORN_CONFIG = ROOT / "config" / "gunicorn.conf.py"
