"""deploy/postgres/roles.sql: the job's role writes the sink, a reader's role can only read it."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from connectors.sinks import SinkError, open_sink
from tests.connectors.sinks.record_frames import commit, frame, offsets_of, progress
from tests.fixtures.postgres import find_postgres_bin

pytestmark = pytest.mark.postgres

ROLES_SQL = Path(__file__).parents[3] / "deploy" / "postgres" / "roles.sql"


def _as_user(url: str, user: str, password: str, schema: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(
        (parts.scheme, f"{user}:{password}@{host}", parts.path, f"schema={schema}", "")
    )


@pytest.fixture
def roles(postgres_url: str) -> Iterator[dict[str, str]]:
    """Run roles.sql with psql for roles and a schema of this test's own; dropped after."""
    bindir = find_postgres_bin()
    psql = str(bindir / "psql") if bindir else "psql"
    suffix = uuid.uuid4().hex[:8]
    names = {
        "writer": f"co_writer_{suffix}",
        "reader": f"co_reader_{suffix}",
        "schema": f"co_{suffix}",
        "writer_password": f"w-{suffix}",
        "reader_password": f"r-{suffix}",
    }
    variables = [arg for key, value in names.items() for arg in ("-v", f"{key}={value}")]
    result = subprocess.run(
        [psql, postgres_url, "-X", "-q", "-v", "ON_ERROR_STOP=1", *variables, "-f", str(ROLES_SQL)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    try:
        yield {
            "writer": _as_user(
                postgres_url, names["writer"], names["writer_password"], names["schema"]
            ),
            "reader": _as_user(
                postgres_url, names["reader"], names["reader_password"], names["schema"]
            ),
            "schema": names["schema"],
        }
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{names["schema"]}" CASCADE')
            for role in (names["reader"], names["writer"]):
                conn.execute(f'DROP OWNED BY "{role}" CASCADE')
                conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_the_writer_writes_and_the_reader_only_reads(roles: dict[str, str]) -> None:
    writer = open_sink(roles["writer"], keep_history=True)
    try:
        assert writer.write_batch(0, frame(commit("payments", "orders", 0, 42)), progress(0))
    finally:
        writer.close()

    reader = open_sink(roles["reader"], read_only=True)
    try:
        assert offsets_of(reader, "payments") == {("orders", 0): 42}
        assert [h.offset for h in reader.history("payments")] == [42]
        assert reader.status().last_batch_id == 0
    finally:
        reader.close()

    # The reader's role itself cannot write, whatever the client asks for.
    schema = roles["schema"]
    refused = [
        f"INSERT INTO \"{schema}\".consumer_offsets VALUES ('g', 't', 0, 1, -1, '', 0, NULL, 0)",
        f'UPDATE "{schema}".consumer_offsets SET committed_offset = 0',
        f'DELETE FROM "{schema}".offset_commit_history',
        f'CREATE TABLE "{schema}".intruder (x int)',
        f'DROP TABLE "{schema}".consumer_offsets',
    ]
    for statement in refused:
        with psycopg.connect(roles["reader"].partition("?")[0], autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = off")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)

    # A writable sink on the reader's role fails at open with one clear line, changing nothing.
    with pytest.raises(SinkError, match=r"read-only transaction|permission denied"):
        open_sink(roles["reader"])
    writer = open_sink(roles["writer"], read_only=True)
    try:
        assert offsets_of(writer, "payments") == {("orders", 0): 42}
    finally:
        writer.close()
