"""The sink's schema versions and the steps that migrate an older sink in place.

A writable sink migrates on open in one transaction, from no tables (0: a new sink takes every
step), the first release's tables (1, no versions recorded) or an older version; it refuses a
newer one. A read-only sink runs no DDL: it refuses an older sink and reads a newer one (steps
add, or drop an index only). Each step's DDL is rendered from ``tables`` for the sink's dialect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.statements import compile_sql, dialect
from connectors.sinks.tables import (
    HISTORY_AS_OF_INDEX,
    HISTORY_KEY_INDEX,
    HISTORY_TIME_INDEX,
    STATES_V1,
    define_tables,
    status_table,
)
from connectors.sinks.values import SinkError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step: the version it brings the sink to and what it changes (stored with it)."""

    version: int
    description: str


#: Schema 1: the tables as created before schema versions existed (the baseline).
BASELINE: Final = Migration(1, "baseline: offsets, groups, status, history, log-end offsets")

#: Every step after the baseline, in order; each adds (or drops an index), so older readers
#: keep working.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        2,
        "history indexed by commit time (history retention); status heartbeat (liveness)",
    ),
    Migration(3, "log-end offsets over time per partition (lag in seconds)"),
    Migration(4, "offset commits counted per group (the commits counter)"),
    # Widens a CHECK constraint: every row of an older sink still satisfies it.
    Migration(5, "status STARTING (the job runs, its first micro-batch not completed yet)"),
    Migration(
        6,
        "deployment lease (one writer per deployment, its epoch fences writes) and standbys",
    ),
    Migration(7, "history indexed by key and commit time (thinning, offsets as of a time)"),
    # Drops an index: older readers read on schema 7's instead.
    Migration(8, "history no longer indexed by key and batch (schema 7's index serves its reads)"),
)

#: The status row of a new sink, up to ``updated_at_ms``: STOPPED, before any batch.
NEW_STATUS_ROW: Final = (1, "STOPPED", "", -1, "{}", 0, 0, 0, 0, 0, 0, None, 0)

#: The version this release writes.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version if MIGRATIONS else BASELINE.version


def steps_after(version: int) -> list[Migration]:
    """The steps that bring a sink at ``version`` (0: no tables) to :data:`SCHEMA_VERSION`."""
    if version < 0:
        raise ValueError(f"schema version must be >= 0, got {version}")
    return [step for step in (BASELINE, *MIGRATIONS) if step.version > version]


def step_ddl(version: int, dialect_name: str, prefix: str, schema: str | None) -> list[str]:
    """The DDL of the step to ``version`` (1: the baseline's tables) for the dialect, in order."""
    t = define_tables(prefix, schema)
    on = dialect(dialect_name)
    quote = on.identifier_preparer
    status_name = t["status"].name
    status = quote.format_table(t["status"])
    indexes = {index.name: index for index in t["history"].indexes}

    def index(name: str) -> str:
        return compile_sql(CreateIndex(indexes[prefix + name], if_not_exists=True), on)

    def create(table: sa.Table) -> str:
        return compile_sql(CreateTable(table, if_not_exists=True), on)

    if version == 1:
        v1_status = status_table(sa.MetaData(schema=schema), status_name, STATES_V1, False)
        return [
            *(create(t[role]) for role in ("offsets", "groups")),
            create(v1_status),
            # The baseline's history index by key and batch: schema 8 drops it, so a new sink
            # never builds it.
            create(t["history"]),
            *(create(t[role]) for role in ("log_end", "members", "source")),
        ]
    if version == 2:
        heartbeat = on.ddl_compiler(on, None).get_column_specification(
            t["status"].c.heartbeat_at_ms
        )
        steps = [
            index(HISTORY_TIME_INDEX),
            f"ALTER TABLE {status} ADD COLUMN {heartbeat}",
        ]
        if dialect_name == "postgresql":
            # History retention deletes a little every minute: vacuum the table after 2% of it
            # is dead rather than PostgreSQL's 20%, so freed space is reused soon.
            steps.append(
                f"ALTER TABLE {quote.format_table(t['history'])} SET"
                " (autovacuum_vacuum_scale_factor = 0.02,"
                " autovacuum_vacuum_insert_scale_factor = 0.02)"
            )
        return steps
    if version in (3, 4):
        return [create(t[{3: "samples", 4: "commits"}[version]])]
    if version == 6:
        return [create(t["lease"]), create(t["standbys"])]
    if version == 7:
        return [index(HISTORY_AS_OF_INDEX)]
    if version == 8:
        return [
            f"DROP INDEX IF EXISTS {quote.quote_schema(schema) + '.' if schema else ''}"
            f"{quote.quote(prefix + HISTORY_KEY_INDEX)}"
        ]
    if version == 5:
        (check,) = t["status"].c.status.constraints
        if dialect_name == "postgresql":
            # The name PostgreSQL gave the baseline's CHECK (<table>_<column>_check).
            name = quote.quote(f"{status_name}_status_check")
            return [
                f"ALTER TABLE {status} DROP CONSTRAINT IF EXISTS {name},"
                f" ADD CONSTRAINT {name} CHECK ({check.sqltext})"  # type: ignore[attr-defined]
            ]
        # SQLite cannot alter a CHECK constraint: the one-row table is copied into a new one.
        new = status_table(sa.MetaData(schema=schema), status_name + "_v5")
        return [
            create(new),
            f"INSERT INTO {quote.format_table(new)} SELECT * FROM {status}",
            f"DROP TABLE {status}",
            f"ALTER TABLE {quote.format_table(new)} RENAME TO {quote.quote(status_name)}",
        ]
    raise ValueError(f"no sink schema step to version {version}")


class SchemaMigrations(SinkCore):
    """Opening a sink: create or migrate its tables, or check a read-only sink's version."""

    def _lock_schema(self, tx: Statements) -> None:
        """Serialise concurrent migrations of the same tables inside ``tx`` (and create the
        namespace the tables live in). SQLite's ``BEGIN IMMEDIATE`` already does."""

    def _table_exists_params(self, table: str) -> tuple[object, ...]:
        """The parameters of ``table_exists`` for ``table`` (unquoted, in the sink's schema)."""
        return (table,)

    def _open(self) -> None:
        """Connect, then migrate the tables (read-only: check their version): the end of a
        backend's constructor."""
        with self._lock:
            self._connection()
        if self.read_only:
            self._check_schema_readable()
        else:
            self._migrate()
        log.info("opened sink %s (read_only=%s)", self.url, self.read_only)

    def _migrate(self) -> None:
        """Bring the tables to :data:`SCHEMA_VERSION` in one transaction."""
        applied: list[Migration] = []
        found = 0

        def migrate(tx: Statements) -> bool:
            nonlocal found
            self._lock_schema(tx)
            tx.execute(self._sql["create_schema_table"])
            found = self._schema_version(
                lambda name, *params: tx.execute(self._sql[name], params).fetchall()
            )
            if found > SCHEMA_VERSION:
                raise SinkError(
                    f"{self.url} has sink schema version {found}, newer than this release's"
                    f" {SCHEMA_VERSION}: it was written by a newer release; run that release (or"
                    " a newer one) against it"
                )
            for step in steps_after(found):
                for statement in step_ddl(
                    step.version, self.dialect_name, self._prefix, self._schema
                ):
                    tx.execute(statement)
                tx.execute(
                    self._sql["record_schema_version"],
                    (step.version, step.description, self._clock()),
                )
                applied.append(step)
            tx.execute(self._sql["insert_status"], (*NEW_STATUS_ROW, self._clock()))
            return True

        self._write(migrate, "cannot create or migrate the sink tables")
        if found and applied:
            log.warning(
                "%s: sink schema migrated from version %d to %d (%s)",
                self.url,
                found,
                SCHEMA_VERSION,
                "; ".join(f"{step.version}: {step.description}" for step in applied),
            )

    def _check_schema_readable(self) -> None:
        """Refuse (SinkError) a read-only open of a sink older than this release."""
        found = self.schema_version()
        if 0 < found < SCHEMA_VERSION:
            raise SinkError(
                f"{self.url} has sink schema version {found}, older than this release's"
                f" {SCHEMA_VERSION}: start the job or the mirror of this release on it once (it"
                " migrates the sink in place), then read it"
            )

    def schema_version(self) -> int:
        """The sink's schema version: the newest recorded step, 1 for the tables of a release
        before versions, 0 for no tables."""
        return self._schema_version(lambda name, *params: self._run(name, params))

    def _schema_version(self, run: Callable[..., list[Any]]) -> int:
        """:meth:`schema_version`, ``run(statement, *params)`` returning a statement's rows."""

        def exists(role: str) -> bool:
            return bool(run("table_exists", *self._table_exists_params(self._tables[role].name)))

        newest = run("schema_version")[0][0] if exists("schema") else None
        return int(newest) if newest is not None else int(exists("offsets"))
