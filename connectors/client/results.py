"""What the commit client's calls return: the successful outcomes, and the async callback type.

Failures are exceptions instead (``connectors.client.errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from state.coordinator.model import OffsetAndMetadata, TopicPartition

__all__ = ["CommitCallback", "CommitResult", "DeleteResult"]


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A successful commit: every partition of ``offsets`` is in the offsets topic and the sink.

    ``request_ids`` lists one id per attempt (several when retriable errors were retried).
    """

    group_id: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    request_ids: tuple[str, ...] = ()

    @property
    def attempts(self) -> int:
        """How many requests the commit took (0 for an empty commit, which sends none)."""
        return len(self.request_ids)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A successful OffsetDelete (``partitions`` as requested) or DeleteGroups (``()``)."""

    group_id: str
    partitions: tuple[TopicPartition, ...] = ()
    request_ids: tuple[str, ...] = ()


#: ``callback(result, exception)``: exactly one of the two is None.
CommitCallback = Callable[[CommitResult | None, BaseException | None], None]
