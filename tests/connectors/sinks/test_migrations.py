"""Schema versions: a sink written by each earlier release is migrated in place.

The old sinks are files checked in under ``data/`` (see its README): per release (schema 1, the
release before versions; schema 4, release 2) a SQLite database and a PostgreSQL dump, each as
that release wrote it. Each test opens a copy with today's code.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.sinks import GroupListing, Sink, SinkError, open_sink
from connectors.sinks.schema import SCHEMA_VERSION, steps_after
from tests.connectors.sinks.record_frames import commit, frame, offsets_of, progress
from tests.fixtures.postgres import with_query

DATA = Path(__file__).parent / "data"
NUL_GROUP = "nul\x00group"


@pytest.fixture(params=[1, 4], ids=["v1", "v4"])
def old_release(request: pytest.FixtureRequest) -> int:
    """The schema version of an earlier release's sink (1: before versions, 4: release 2)."""
    return int(request.param)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_sink_url(request: pytest.FixtureRequest, tmp_path: Path, old_release: int) -> Iterator[str]:
    """A sink URL over a copy of the ``old_release`` sink of the backend."""
    name = f"sink-v{old_release}"
    if request.param == "sqlite":
        copy = tmp_path / f"{name}.db"
        shutil.copy(DATA / f"{name}.sqlite", copy)
        yield f"sqlite:///{copy}"
        return
    import psycopg

    server = request.getfixturevalue("postgres_url")
    database = f"sink_v{old_release}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    url = _database_url(server, database)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute((DATA / f"{name}.postgres.sql").read_text(encoding="utf-8"))  # type: ignore[arg-type]
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _database_url(server: str, database: str) -> str:
    base, _, query = server.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{database}" + (f"?{query}" if query else "")


def _last_batch(release: int) -> int:
    """The last micro-batch the release wrote: release 2 added batch 2 (group ``audit``)."""
    return 1 if release == 1 else 2


def _assert_holds_the_old_data(sink: Sink, release: int) -> None:
    audit = [GroupListing("audit", 1)] if release > 1 else []
    assert offsets_of(sink, "audit") == ({("orders", 2): 3} if audit else {})
    assert sink.group_commits() == ({"audit": 1} if audit else {})
    assert offsets_of(sink, "payments") == {("orders", 0): 17, ("orders", 1): 20}
    (payments0,) = sink.fetch_offsets("payments", [("orders", 0)])
    assert (payments0.leader_epoch, payments0.commit_timestamp_ms) == (4, 1_700_000_003_000)
    assert offsets_of(sink, NUL_GROUP) == {("t\u00e9\u2713", 0): 5}
    assert offsets_of(sink, "gone") == {}
    assert sink.list_groups() == [
        *audit,
        GroupListing("classic", 0, generation=3, members=2),
        GroupListing(NUL_GROUP, 1),
        GroupListing("payments", 2),
    ]
    assert [h.offset for h in sink.history("payments", "orders", 0)] == [17, 15, 10]
    assert [h.group_id for h in sink.history(NUL_GROUP)] == [NUL_GROUP]
    status = sink.status()
    assert (status.status, status.last_batch_id, status.ingest_offsets) == (
        "ACTIVE",
        _last_batch(release),
        {0: 8 if release == 1 else 9, 1: 7},
    )
    assert {(e.topic, e.partition): e.offset for e in sink.log_end_offsets().values()} == {
        ("orders", 0): 30,
        ("orders", 1): 25,
    }


def test_an_old_sink_is_migrated_in_place_and_keeps_its_data(
    old_sink_url: str, old_release: int
) -> None:
    last = _last_batch(old_release)
    sink = open_sink(old_sink_url, keep_history=True)
    try:
        assert sink.schema_version() == SCHEMA_VERSION > old_release
        _assert_holds_the_old_data(sink, old_release)
        # What the migration added works: a heartbeat, and retention by commit time.
        assert sink.status().heartbeat_at_ms is None
        sink.heartbeat()
        assert sink.status().heartbeat_at_ms is not None
        # A job that has not completed its first micro-batch (schema 5); the row keeps the rest.
        sink.set_status("STARTING", "resumed from checkpoint")
        assert (sink.status().status, sink.status().last_batch_id) == ("STARTING", last)
        assert sink.status().heartbeat_at_ms is not None
        assert sink.purge_history(1_700_000_001_500, 100) == 4
        assert [h.offset for h in sink.history("payments", "orders", 0)] == [17, 15]
        # The next batch continues where the old release stopped.
        batch = frame(commit("payments", "orders", 1, 21))
        assert sink.write_batch(last + 1, batch, progress(last + 1))
        assert offsets_of(sink, "payments")[("orders", 1)] == 21
        batch = frame(commit("payments", "orders", 1, 99))
        assert sink.write_batch(last, batch, progress(last)) is False
    finally:
        sink.close()
    # Opening it again migrates nothing more.
    again = open_sink(old_sink_url, keep_history=True)
    try:
        assert again.schema_version() == SCHEMA_VERSION
        assert offsets_of(again, "payments")[("orders", 1)] == 21
    finally:
        again.close()


def test_a_reader_refuses_a_sink_not_migrated_yet(old_sink_url: str, old_release: int) -> None:
    refused = rf"schema version {old_release}, older than .* start the job"
    with pytest.raises(SinkError, match=refused):
        open_sink(old_sink_url, read_only=True)
    open_sink(old_sink_url).close()  # a writer migrates it
    reader = open_sink(old_sink_url, read_only=True)
    try:
        _assert_holds_the_old_data(reader, old_release)
    finally:
        reader.close()


def test_a_new_sink_records_every_step(make_sink: object) -> None:
    sink = make_sink()  # type: ignore[operator]
    assert sink.schema_version() == SCHEMA_VERSION
    steps = [step.version for step in steps_after(0)]
    assert steps == list(range(1, SCHEMA_VERSION + 1))


def test_a_sink_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    open_sink(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO sink_schema_version (version, description, applied_at_ms)"
            " VALUES (?, 'from the future', 0)",
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(SinkError, match=rf"version {SCHEMA_VERSION + 1}, newer than"):
        open_sink(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:  # refused before anything was written
        assert conn.execute("SELECT MAX(version) FROM sink_schema_version").fetchone() == (
            SCHEMA_VERSION + 1,
        )


def test_a_table_prefix_of_an_old_database_is_migrated_alone(tmp_path: Path) -> None:
    """Two prefixes in one database: each has its own version."""
    copy = tmp_path / "sink-v1.db"
    shutil.copy(DATA / "sink-v1.sqlite", copy)
    other = open_sink(with_query(f"sqlite:///{copy}", table_prefix="staging_"))
    try:
        assert other.schema_version() == SCHEMA_VERSION
        assert other.list_groups() == []
    finally:
        other.close()
    with pytest.raises(SinkError, match="schema version 1"):
        open_sink(f"sqlite:///{copy}", read_only=True)


def _ours(name: str, prefix: str) -> bool:
    """Whether ``name`` belongs to the sink of ``prefix`` ("" for the old one, "fresh_")."""
    return name.startswith(prefix) and (prefix != "" or not name.startswith("fresh_"))


def _sqlite_catalog(url: str, prefix: str) -> dict[str, object]:
    """Each table's columns, indexes, CHECKs and storage (rowid or not), prefix removed."""
    path = url.removeprefix("sqlite:///")
    catalog: dict[str, object] = {}
    with sqlite3.connect(path) as conn:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        for name, sql in tables.fetchall():
            if not _ours(name, prefix):
                continue
            indexes = [
                (row[1].replace(name, "T"), row[2], row[3])
                for row in conn.execute(f'PRAGMA index_list("{name}")')
            ]
            catalog[name.removeprefix(prefix)] = (
                conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall(),
                sorted(indexes),
                sorted(re.findall(r"CHECK\s*\(([^()]*(?:\([^()]*\))?[^()]*)\)", sql)),
                "WITHOUT ROWID" in sql.upper(),
            )
        for name, table, columns in conn.execute(
            "SELECT i.name, i.tbl_name, group_concat(c.name) FROM sqlite_master AS i,"
            " pragma_index_info(i.name) AS c WHERE i.type = 'index' AND i.sql IS NOT NULL"
            " GROUP BY i.name"
        ):
            if _ours(name, prefix):
                catalog[name.removeprefix(prefix)] = (table.removeprefix(prefix), columns)
    return catalog


def _postgres_catalog(url: str, prefix: str) -> dict[str, object]:
    """Each table's columns, constraints, indexes and storage options, prefix removed."""
    import psycopg

    catalog: dict[str, object] = {}
    with psycopg.connect(url) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            if _ours(name, prefix)
        ]
        for name in tables:
            catalog[name.removeprefix(prefix)] = (
                conn.execute(
                    "SELECT column_name, data_type, is_nullable, collation_name, column_default"
                    " FROM information_schema.columns WHERE table_schema = 'public'"
                    " AND table_name = %s ORDER BY ordinal_position",
                    (name,),
                ).fetchall(),
                sorted(
                    (n.removeprefix(prefix), d)
                    for n, d in conn.execute(
                        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                        " WHERE conrelid = %s::regclass",
                        (name,),
                    )
                ),
                sorted(
                    d.replace(prefix, "") if prefix else d
                    for (d,) in conn.execute(
                        "SELECT indexdef FROM pg_indexes WHERE tablename = %s", (name,)
                    )
                ),
                conn.execute(
                    "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (name,)
                ).fetchone(),
            )
    return catalog


def test_a_migrated_sink_has_the_schema_of_a_new_one(old_sink_url: str) -> None:
    """The baseline rendered today and the steps give a new sink exactly the tables an old
    sink has once migrated: same columns, types, constraints, indexes and storage."""
    catalog = _sqlite_catalog if old_sink_url.startswith("sqlite") else _postgres_catalog
    open_sink(old_sink_url).close()
    open_sink(old_sink_url, table_prefix="fresh_").close()
    migrated, fresh = catalog(old_sink_url, ""), catalog(old_sink_url, "fresh_")
    assert len(fresh) >= 10  # every table (and, in SQLite, index)
    assert migrated == fresh
