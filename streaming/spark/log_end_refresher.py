"""The mirror's log-end offsets, read from the mirrored cluster into its sink every interval, so
the sink answers lag alone. A failed refresh is logged and retried; it never stops the mirror.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from connectors.client.offsets_reader import BrokerOffsets
from connectors.kafka.admin import LOG_END_INTERVAL_S
from connectors.sinks import Sink, SinkError

log = logging.getLogger(__name__)


class LogEndRefresher:
    """A thread that stores the committed topics' log-end offsets every ``interval_s``."""

    def __init__(
        self,
        sink: Sink,
        client_options: Mapping[str, Any],
        interval_s: float = LOG_END_INTERVAL_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"log-end refresh interval must be > 0 s, got {interval_s}")
        self.sink = sink
        self.interval_s = interval_s
        self._broker = BrokerOffsets(client_options)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> int:
        """One round, now; the number of partitions stored."""
        ends = self._broker.topic_end_offsets(self.sink.committed_topics())
        self.sink.write_log_end_offsets({(tp.topic, tp.partition): o for tp, o in ends.items()})
        return len(ends)

    def start(self) -> None:
        """Refresh now and then every ``interval_s`` in a daemon thread, until :meth:`stop`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name="log-end-offsets-refresher", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                stored = self.refresh()
                log.debug("log-end offsets of %d partition(s) stored", stored)
            except (SinkError, OSError, RuntimeError) as exc:
                # kafka-python's errors are RuntimeErrors (KafkaError), the sink's SinkErrors.
                log.warning(
                    "log-end offsets not refreshed (retried in %.0f s): %s", self.interval_s, exc
                )
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the thread (waiting for a refresh under way) and close the cluster connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self._broker.close()
