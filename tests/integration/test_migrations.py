from __future__ import annotations

import threading

import psycopg2

from queen_threads import migrate


def _tables(dsn: str) -> set[str]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'queen'")
        return {r[0] for r in cur.fetchall()}


def _applied(dsn: str) -> list[tuple[str, str]]:
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT version, checksum FROM queen.schema_migrations ORDER BY version")
        return list(cur.fetchall())


def test_migrate_creates_schema_and_is_idempotent(fresh_db: str) -> None:
    first = migrate.migrate(fresh_db)
    assert first, "a fresh database gets every file"
    assert {"system_state", "schema_migrations"} <= _tables(fresh_db)
    recorded = _applied(fresh_db)
    assert migrate.migrate(fresh_db) == []
    assert _applied(fresh_db) == recorded


def test_concurrent_migrations_apply_each_file_once(fresh_db: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate.migrate(fresh_db))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    applied = [name for r in results for name in r]
    assert sorted(applied) == sorted(f.name for f in migrate.schema_files())


def test_changed_function_file_is_reapplied(fresh_db: str, tmp_path, monkeypatch) -> None:
    migrate.migrate(fresh_db)
    fn_dir = tmp_path / "functions"
    fn_dir.mkdir()
    body = "CREATE OR REPLACE FUNCTION queen.answer() RETURNS int LANGUAGE sql AS $$ SELECT {} $$;"
    (fn_dir / "99_answer.sql").write_text(body.format(41))
    real = migrate.schema_files
    monkeypatch.setattr(migrate, "schema_files", lambda: real(functions_dir=fn_dir))
    assert migrate.migrate(fresh_db) == ["99_answer"]
    (fn_dir / "99_answer.sql").write_text(body.format(42))
    assert migrate.migrate(fresh_db) == ["99_answer"]
    assert migrate.migrate(fresh_db) == []
    with psycopg2.connect(fresh_db) as conn, conn.cursor() as cur:
        cur.execute("SELECT queen.answer()")
        assert cur.fetchone() == (42,)
