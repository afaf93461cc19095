"""The queryable sink: where the streaming job writes compacted offsets and users read them.

The streaming job calls :meth:`Sink.write_batch` from ``foreachBatch`` on the driver, once per
micro-batch, with the batch's records (``state.formats.frames.RECORD_FRAME_SCHEMA``) as a pyarrow
Table. The sink keeps the *compacted* view of the offsets topic — the last value per key, tombstones
removed — so readers answer OffsetFetch without replaying the log.

Contract shared by every sink (the contract tests run it against each implementation):

* A batch is applied in one transaction together with its progress row: readers see all of a
  batch or none of it, and a failed batch leaves the previous state intact.
* A batch is deduplicated to the last record per key before it is applied (offsets keyed by
  ``(group_id, topic, partition)``, group metadata by ``group_id``); a null ``value`` is a
  tombstone and deletes the key. Applying the deduplicated batch equals applying every record in
  log order.
* Batches are idempotent per batch id: a batch id at or below the last committed one changes
  nothing and ``write_batch`` returns False (Spark replays the last batch after a restart).
* Values always travel as bound parameters; identifiers (the optional table prefix, the schema)
  are validated and quoted.
* Every string is stored, NUL included (PostgreSQL ``text`` cannot hold NUL): names and metadata
  go through ``connectors.sinks.text``, which escapes NUL, and every reader here takes and
  returns the original strings.

:class:`Sink` implements that contract once, one part per concern (``writes``, ``reads``,
``status``, ``log_ends``, ``history``, ``schema``, over ``core``), with every statement said once
for both dialects (``statements``, over the tables of ``tables``). A backend supplies only its
connection and transactions (``sqlite``, ``postgres``). Sinks are opened with
``connectors.sinks.open.open_sink`` from a URL; messages and logs only ever show the URL
redacted (``connectors.sinks.url.redact_url``).
"""

from __future__ import annotations

from connectors.sinks.history import CommitHistory
from connectors.sinks.log_ends import LogEndOffsets
from connectors.sinks.reads import Reads
from connectors.sinks.schema import SchemaMigrations
from connectors.sinks.status import StatusRow
from connectors.sinks.writes import Writes


class Sink(Writes, Reads, StatusRow, LogEndOffsets, CommitHistory, SchemaMigrations):
    """A store of the compacted offsets state, written per micro-batch and read by users.

    One instance holds one connection guarded by a lock; readers in other processes open their
    own sink (``open_sink(url, read_only=True)``) rather than sharing this one.
    """
