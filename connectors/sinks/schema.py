"""Versions of the sink's schema and the ordered steps that migrate an older sink in place.

A sink records the steps applied to it in its ``sink_schema_version`` table (one row per step:
version, description, when). A writable sink migrates on open, in one transaction that also
holds the backend's schema lock, so two processes opening an old sink at once migrate it once:

* no tables at all: the baseline (schema 1, the tables as the first release created them) is
  created, then every step after it runs — a new sink takes the same path as an old one, so the
  steps are exercised on every start, not only on upgrades;
* the first release's tables but no version table (schema 1, written before versions existed):
  every step after 1 runs;
* an older version: the steps after it run, in order;
* a newer version than this release knows: refused (a downgrade would write rows the newer
  schema's readers misread), and the message names both versions.

A read-only sink runs no DDL: it refuses a sink older than this release (its reads would name
columns the sink lacks) with a message saying how to migrate it, and reads a newer one as long
as the columns it reads still exist (steps only add).

The backends give each step's statements (``Sink._migration_statements``); the order and the
bookkeeping are here, once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from connectors.sinks.core import SinkCore, Statements
from connectors.sinks.values import SinkError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step: the version it brings the sink to and what it changes (stored with it)."""

    version: int
    description: str


#: Schema 1: the tables as created before schema versions existed (the baseline).
BASELINE: Final = Migration(1, "baseline: offsets, groups, status, history, log-end offsets")

#: Every step after the baseline, in order. A step only adds (tables, columns, indexes), so a
#: reader of an older release keeps working on a migrated sink.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        2,
        "history indexed by commit time (history retention); status heartbeat (liveness)",
    ),
    Migration(3, "log-end offsets over time per partition (lag in seconds)"),
    Migration(4, "offset commits counted per group (the commits counter)"),
    # Widens a CHECK constraint: every row of an older sink still satisfies it.
    Migration(5, "status STARTING (the job runs, its first micro-batch not completed yet)"),
)

#: The version this release writes.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version if MIGRATIONS else BASELINE.version


def steps_after(version: int) -> list[Migration]:
    """The steps that bring a sink at ``version`` (0: no tables) to :data:`SCHEMA_VERSION`."""
    if version < 0:
        raise ValueError(f"schema version must be >= 0, got {version}")
    every = (BASELINE, *MIGRATIONS)
    return [step for step in every if step.version > version]


def too_new_message(url: str, found: int) -> str:
    """The refusal of a sink written by a newer release."""
    return (
        f"{url} has sink schema version {found}, newer than this release's {SCHEMA_VERSION}: "
        "it was written by a newer release; run that release (or a newer one) against it"
    )


def too_old_message(url: str, found: int) -> str:
    """The refusal of a read-only open of a sink that has not been migrated yet."""
    return (
        f"{url} has sink schema version {found}, older than this release's {SCHEMA_VERSION}: "
        "start the job or the mirror of this release on it once (it migrates the sink in "
        "place), then read it"
    )


class SchemaMigrations(SinkCore):
    """Opening a sink: create or migrate its tables, or check a read-only sink's version."""

    def _open(self) -> None:
        """Connect and, unless read-only, create or migrate the tables (``schema``): the end of a
        backend's constructor. A read-only sink checks the schema version instead."""
        with self._lock:
            conn = self._connection()
            if self.read_only:
                self._check_schema_readable()
            else:
                self._migrate(conn)
        log.info("opened sink %s (read_only=%s)", self.url, self.read_only)

    def _migrate(self, conn: Any) -> None:
        """Bring the tables to :data:`SCHEMA_VERSION` in one transaction (see ``schema``)."""
        applied: list[Migration] = []
        found = 0

        def migrate(tx: Statements) -> bool:
            nonlocal found
            self._lock_schema(tx)
            tx.execute(self._sql["create_schema_table"])
            found = self._schema_version(tx)
            if found > SCHEMA_VERSION:
                raise SinkError(too_new_message(self.url, found))
            for step in steps_after(found):
                statements = (
                    self._baseline_statements()
                    if step.version == BASELINE.version
                    else self._migration_statements(step.version)
                )
                for statement in statements:
                    tx.execute(statement)
                tx.execute(
                    self._sql["record_schema_version"],
                    (step.version, step.description, self._clock()),
                )
                applied.append(step)
            tx.execute(self._sql["insert_status"], (self._clock(),))
            return True

        try:
            self._transaction(conn, migrate)
        except self._driver_error as exc:
            raise SinkError(
                f"cannot create or migrate the sink tables in {self.url}: {exc}"
            ) from exc
        if found and applied:
            log.warning(
                "%s: sink schema migrated from version %d to %d (%s)",
                self.url,
                found,
                SCHEMA_VERSION,
                "; ".join(f"{step.version}: {step.description}" for step in applied),
            )

    def _schema_version(self, tx: Statements) -> int:
        """The sink's schema version: the newest recorded step, 1 for the tables of a release
        before versions (no step recorded), 0 for no tables."""
        (newest,) = tx.execute(self._sql["schema_version"]).fetchone()
        if newest is not None:
            return int(newest)
        return 1 if tx.execute(*self._table_exists_query(self._names.offsets)).fetchone() else 0

    def _check_schema_readable(self) -> None:
        """Refuse (SinkError) a read-only open of a sink older than this release."""
        found = self.schema_version()
        if 0 < found < SCHEMA_VERSION:
            raise SinkError(too_old_message(self.url, found))

    def schema_version(self) -> int:
        """The schema version recorded in the sink (0: none; see ``connectors.sinks.schema``)."""
        if not self._run(*self._table_exists_query(self._names.schema)):
            return 1 if self._run(*self._table_exists_query(self._names.offsets)) else 0
        (newest,) = self._run(self._sql["schema_version"])[0]
        return int(newest or 1)
