"""The sink: the compacted offsets topic (the last value per key, tombstones removed), written
once per micro-batch from ``foreachBatch`` and read by users without replaying the log.

The contract of every backend (the contract tests run it against each):

* A batch (``state.formats.frames.RECORD_FRAME_SCHEMA``, log order) is applied in one transaction
  with its progress row: readers see all of it or none of it.
* It is reduced to the last record per key (offsets by group, topic and partition; metadata by
  group) first; a null ``value`` deletes the key.
* It is idempotent per batch id: one at or below the last committed changes nothing and
  ``write_batch`` returns False (Spark replays the last batch after a restart).
* While the sink holds a deployment lease (``lease``), every write checks its epoch in the
  same transaction and rolls back with LeaseLost when it was taken over.
* Values travel as bound parameters; identifiers (table prefix, schema) are validated and quoted.
* Every string is stored, NUL included (``connectors.sinks.text``); messages and logs show the
  URL redacted.
"""

from __future__ import annotations

from connectors.sinks.history import CommitHistory
from connectors.sinks.lease import Leases
from connectors.sinks.log_ends import LogEndOffsets
from connectors.sinks.reads import Reads
from connectors.sinks.schema import SchemaMigrations
from connectors.sinks.status import StatusRow
from connectors.sinks.writes import Writes


class Sink(Writes, Reads, StatusRow, LogEndOffsets, CommitHistory, SchemaMigrations, Leases):
    """The sink, one part per concern over ``core``; a backend (``sqlite``, ``postgres``)
    supplies its connection and transactions. Readers in other processes open their own
    (``open_sink(url, read_only=True)``)."""
