"""Where a group was at a past time, for ``serve``: its partitions' committed offsets over the
kept commit history, with the ranges where that history is thinned; its offsets as of a time
(``connectors.client.as_of``, the one answer of the group page, the ``offsets?as_of=`` route
and ``describe --as-of``); and the CLI command that puts the group back there (``serve``
itself never writes offsets). Everything is as the request's viewer may see it."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from connectors.client.as_of import CommittedAsOf, committed_as_of
from connectors.sinks.values import now_ms
from state.commit_history import HOUR, MINUTE, SECOND, TIERS, Tier, thinned_before
from state.coordinator.model import TopicPartition
from streaming.serve.tenant_views import Viewer

if TYPE_CHECKING:
    from connectors.sinks import Sink

#: The most history rows one view of a group page reads (the newest applied): about the whole
#: kept history of two partitions (``rows_bound()`` is 990 each), so a page stays a few hundred
#: kB and one query whatever the group's size; older kept commits are still answered as of.
HISTORY_ROWS: Final = 2000


def parse_as_of(text: str) -> int:
    """An ``as_of`` value as epoch ms: digits, or ISO 8601 (no zone: UTC, as the page's time
    input sends it); a ValueError naming ``as_of`` if neither."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        parsed = datetime.fromisoformat(stripped)
    except ValueError:
        raise ValueError(f"as_of: expected epoch ms or ISO 8601 time, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def iso_utc(ms: int) -> str:
    """``ms`` as ISO 8601 in UTC with its zone (``Z``), so the CLI (no zone: local time) and
    the page (no zone: UTC) read it alike; milliseconds only when there are some."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    text = moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def offsets_as_of(sink: Sink, viewer: Viewer, group_id: str, at_ms: int) -> list[CommittedAsOf]:
    """The group's commit in force at ``at_ms`` of each partition whose topic ``viewer`` may
    see (the caller has checked the group), with its commit time and exactness."""
    found = committed_as_of(sink, group_id, at_ms, now_ms())
    return [a for a in found if viewer.may_see_topic(a.topic)]


@dataclass(frozen=True, slots=True)
class GroupAsOf:
    """The group page's answer for ``at_ms``: each visible partition's commit then
    (``answers``), the visible partitions committed now but not then (``no_commit_then``,
    which the reset leaves alone), and the reset's command (empty: nothing to go back to).
    Over a mirror's sink (``mirror_of``: the cluster's name) the reset is Kafka's own, with
    ``reset_plan`` as its ``--from-file`` (``topic,partition,offset`` lines)."""

    at_ms: int
    answers: list[CommittedAsOf]
    no_commit_then: list[TopicPartition]
    command: str
    mirror_of: str | None = None
    reset_plan: str = ""

    @property
    def input_value(self) -> str:
        """``at_ms`` as the page's time input shows it (UTC, to the second)."""
        return datetime.fromtimestamp(self.at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def group_as_of(
    sink: Sink, viewer: Viewer, group_id: str, at_ms: int, now: Iterable[TopicPartition]
) -> GroupAsOf:
    """:func:`offsets_as_of` with the partitions of ``now`` (the visible ones committed now)
    that had no commit then, and the command that resets the group to ``at_ms``: the offsets
    job's, or Kafka's own over a mirror's sink (no job reads a reset sent there)."""
    answers = offsets_as_of(sink, viewer, group_id, at_ms)
    then = {a.topic_partition for a in answers}
    later = sorted(tp for tp in now if tp not in then)
    source = sink.source_cluster()
    if source is not None:
        plan = "".join(f"{a.topic},{a.partition},{a.offset}\n" for a in answers)
        command = kafka_reset_command(group_id) if answers else ""
        return GroupAsOf(at_ms, answers, later, command, source.cluster_name, plan)
    # A tenant resets the topics it sees, by name: --all-topics would take in hidden ones.
    topics = None if viewer.sees_all else {*(a.topic for a in answers), *(t for t, _ in later)}
    command = reset_command(group_id, at_ms, topics) if answers else ""
    return GroupAsOf(at_ms, answers, later, command)


#: The file name :func:`kafka_reset_command` reads the reset plan from.
RESET_PLAN_FILE: Final = "offsets.csv"


def kafka_reset_command(group_id: str) -> str:
    """Kafka's ``kafka-consumer-groups.sh`` resetting ``group_id`` to the offsets of
    :data:`RESET_PLAN_FILE`, executed; ``BROKERS`` stands for the cluster's bootstrap servers."""
    words = [
        "kafka-consumer-groups.sh",
        *("--bootstrap-server", "BROKERS"),
        *_option("--group", group_id),
        "--reset-offsets",
        *("--from-file", RESET_PLAN_FILE),
        "--execute",
    ]
    return shlex.join(words)


def _option(flag: str, value: str) -> list[str]:
    # A value starting with "-" would read as a flag of its own: joined with "=" then.
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def reset_command(group_id: str, at_ms: int, topics: Sequence[str] | None = None) -> str:
    """``consumer-offsets reset-offsets`` back to the offsets committed at ``at_ms``, executed,
    quoted for a POSIX shell: every topic the group committed, or only ``topics`` (a tenant's
    visible ones)."""
    scope = ["--all-topics"]
    if topics is not None:
        scope = [word for topic in sorted(topics) for word in _option("--topic", topic)]
    words = [
        "consumer-offsets",
        "reset-offsets",
        *_option("--group", group_id),
        *scope,
        *_option("--to-committed-at", iso_utc(at_ms)),
        "--execute",
    ]
    return shlex.join(words)


def kept_rate(spacing_ms: int) -> str:
    """How the history keeps commits at ``spacing_ms``, as a rate: ``1/s``, ``1/10 min``."""
    for unit, name in ((HOUR, "h"), (MINUTE, "min"), (SECOND, "s")):
        if spacing_ms % unit == 0:
            count = spacing_ms // unit
            return f"1/{name}" if count == 1 else f"1/{count} {name}"
    return f"1/{spacing_ms} ms"


@dataclass(frozen=True, slots=True)
class KeptRange:
    """A range of commit times [``start_ms``, ``end_ms``) where the history keeps the last
    commit of each ``spacing_ms`` bucket (of each group-partition)."""

    start_ms: int
    end_ms: int
    spacing_ms: int

    @property
    def label(self) -> str:
        return kept_rate(self.spacing_ms)


def kept_ranges(oldest_ms: int, now: int, tiers: Sequence[Tier] = TIERS) -> list[KeptRange]:
    """The ranges of the thinning ``tiers`` at ``now`` that hold some time of [``oldest_ms``,
    ``now``], oldest first, the oldest cut at ``oldest_ms``: where each tier's rule applies
    (``state.commit_history.thinned_before``, as its ``kept_one_per`` places a commit)."""
    # Tier i keeps commits timed before its own boundary and from the next (coarser) one's;
    # the finest tier's range runs to now (only the current second is not thinned yet).
    ends = [now, *(thinned_before(tier, now) for tier in tiers[1:])]
    ranges: list[KeptRange] = []
    for i, tier in enumerate(tiers):
        if ranges and ends[i] <= oldest_ms:
            break
        start = ends[i + 1] if i + 1 < len(ends) else oldest_ms
        ranges.append(KeptRange(max(start, oldest_ms), ends[i], tier.spacing_ms))
    return ranges[::-1]


@dataclass(frozen=True, slots=True)
class GroupHistory:
    """A group's kept commits as one page view reads them: per partition (``topic-N``), its
    (commit time ms, offset) oldest first; ``capped`` when the read stopped at its limit
    (older kept commits exist but were not read); ``ranges`` from the oldest read to now."""

    series: dict[str, list[tuple[int, int]]]
    rows_read: int
    capped: bool
    ranges: list[KeptRange]

    @property
    def oldest_ms(self) -> int | None:
        return self.ranges[0].start_ms if self.ranges else None

    @property
    def commits(self) -> int:
        """The commits shown (``rows_read`` also counts those of topics hidden from the viewer,
        which a page must not tell)."""
        return sum(len(points) for points in self.series.values())


def group_history(
    sink: Sink, viewer: Viewer, group_id: str, now: int, limit: int = HISTORY_ROWS
) -> GroupHistory:
    """The group's newest ``limit`` kept commits (one query, whatever the group's size), of
    the topics ``viewer`` may see (the caller has checked the group), with the kept ranges
    they span."""
    entries = sink.history(group_id, limit=limit)
    series: dict[str, list[tuple[int, int]]] = {}
    for entry in reversed(entries):  # newest applied first: oldest first by log order
        if viewer.may_see_topic(entry.topic):
            label = f"{entry.topic}-{entry.partition}"
            series.setdefault(label, []).append((entry.commit_timestamp_ms, entry.offset))
    for points in series.values():
        points.sort(key=lambda point: point[0])  # a late commit drawn at its own time
    times = [t for points in series.values() for t, _ in points]
    ranges = kept_ranges(min(times), max(now, *times)) if times else []
    return GroupHistory(series, len(entries), len(entries) >= limit, ranges)
