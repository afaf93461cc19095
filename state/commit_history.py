"""How the commit history is thinned as it ages, and what an offset "as of" a time means then.

Kafka keeps only a group's latest commit. The history keeps every commit for a short window,
then fewer as they age, so the rows per group-partition stay under a fixed bound whatever the
commit rate: in each tier's range, of the commits of one bucket of ``spacing_ms`` (aligned to
the epoch) only the last (by commit time, then log order) is kept. A bucket is thinned only
once it lies wholly before the tier's boundary, so every answer at or after the newest boundary
is exact, and in a thinned range an answer is exact as of the start of the time's bucket at
worst (:func:`exact_as_of`).

This module is the pure model: the sink's thinning (``connectors.sinks.thinning``) applies the
same rule in SQL, and the tests compare the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

SECOND: Final = 1000
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE
DAY: Final = 24 * HOUR


@dataclass(frozen=True, slots=True)
class Tier:
    """Commits older than ``from_age_ms`` keep one per ``spacing_ms`` bucket."""

    from_age_ms: int
    spacing_ms: int


#: The tiers, finest first; each spacing divides the next so buckets nest. Up to 10 minutes old
#: one commit a second (every commit of a consumer that commits at most once a second: Kafka's
#: auto-commit default is every 5 s), one a minute to 2 hours, one per 10 minutes to a day, one
#: an hour beyond (to the 7 days of :data:`DEFAULT_HISTORY_RETENTION_MS`).
TIERS: Final[tuple[Tier, ...]] = (
    Tier(0, SECOND),
    Tier(10 * MINUTE, MINUTE),
    Tier(2 * HOUR, 10 * MINUTE),
    Tier(DAY, HOUR),
)
#: How long the history keeps a commit by default: the hourly tier's end.
DEFAULT_HISTORY_RETENTION_MS: Final = 7 * DAY


def check_tiers(tiers: Sequence[Tier]) -> None:
    """ValueError naming the tier that breaks the rules: ages increasing from 0, each spacing
    > 0 and a multiple of the one before (buckets nest)."""
    if not tiers or tiers[0].from_age_ms != 0:
        raise ValueError("history tiers: the first tier must start at age 0")
    for i, tier in enumerate(tiers):
        if tier.spacing_ms <= 0:
            raise ValueError(f"history tiers[{i}].spacing_ms must be > 0, got {tier.spacing_ms}")
        if i and tier.from_age_ms <= tiers[i - 1].from_age_ms:
            raise ValueError(f"history tiers[{i}].from_age_ms must grow, got {tier.from_age_ms}")
        if i and tier.spacing_ms % tiers[i - 1].spacing_ms:
            raise ValueError(
                f"history tiers[{i}].spacing_ms must be a multiple of the one before,"
                f" got {tier.spacing_ms}"
            )


check_tiers(TIERS)


def thinned_before(tier: Tier, now_ms: int) -> int:
    """The end of the range ``tier`` thins at ``now_ms``: the start of the bucket holding the
    tier's boundary (commits before it lie in buckets wholly older than the boundary)."""
    boundary = now_ms - tier.from_age_ms
    return boundary - boundary % tier.spacing_ms


def rows_bound(
    tiers: Sequence[Tier] = TIERS, retention_ms: int = DEFAULT_HISTORY_RETENTION_MS
) -> int:
    """The most rows one group-partition keeps after a pass: a bucket per tier's spacing over
    its range (plus one bucket at each edge), whatever the commit rate."""
    return rows_bound_at(retention_ms, tiers, retention_ms)


def rows_bound_at(
    age_ms: int, tiers: Sequence[Tier] = TIERS, retention_ms: int = DEFAULT_HISTORY_RETENTION_MS
) -> int:
    """The most rows a group-partition whose first commit is ``age_ms`` old keeps after a pass
    (however often it commits): :func:`rows_bound` over the ages it has reached. Committed every
    second, it holds that many (give or take an edge bucket per tier)."""
    span = min(age_ms, retention_ms)
    bound = 0
    for i, tier in enumerate(tiers):
        if tier.from_age_ms > span:
            break
        end = min(tiers[i + 1].from_age_ms if i + 1 < len(tiers) else span, span)
        bound += -(-(end - tier.from_age_ms) // tier.spacing_ms) + 1
    return bound


class Commit(NamedTuple):
    """One commit of a group-partition: its time and its place in the log."""

    commit_timestamp_ms: int
    batch_id: int
    seq: int
    offset: int


def _thinning_tier(timestamp_ms: int, tiers: Sequence[Tier], now_ms: int) -> Tier | None:
    """The coarsest tier whose thinned range holds ``timestamp_ms``'s bucket, if any."""
    found = None
    for tier in tiers:
        if timestamp_ms < thinned_before(tier, now_ms):
            found = tier
    return found


def thin(commits: Iterable[Commit], now_ms: int, tiers: Sequence[Tier] = TIERS) -> list[Commit]:
    """The commits of one group-partition a thinning pass at ``now_ms`` keeps, in log order:
    a commit goes when a later one (commit time, then log order) shares its bucket of a tier
    whose range holds that bucket."""
    ordered = sorted(commits, key=lambda c: (c.batch_id, c.seq))
    last: dict[tuple[int, int], Commit] = {}
    for commit in ordered:
        for i, tier in enumerate(tiers):
            if commit.commit_timestamp_ms < thinned_before(tier, now_ms):
                key = (i, commit.commit_timestamp_ms // tier.spacing_ms)
                if key not in last or commit > last[key]:
                    last[key] = commit
    kept = []
    for commit in ordered:
        dropped = any(
            commit.commit_timestamp_ms < thinned_before(tier, now_ms)
            and last[(i, commit.commit_timestamp_ms // tier.spacing_ms)] != commit
            for i, tier in enumerate(tiers)
        )
        if not dropped:
            kept.append(commit)
    return kept


def last_at_or_before(commits: Iterable[Commit], at_ms: int) -> Commit | None:
    """The group-partition's commit in force at ``at_ms``: the last at or before it (commit
    time, then log order); None when there was none."""
    found = [c for c in commits if c.commit_timestamp_ms <= at_ms]
    return max(found) if found else None


def kept_one_per(timestamp_ms: int, now_ms: int, tiers: Sequence[Tier] = TIERS) -> int | None:
    """The spacing (ms) of the range a commit timed ``timestamp_ms`` lies in at ``now_ms``: the
    history keeps one commit per bucket of it there; None where every commit is kept."""
    tier = _thinning_tier(timestamp_ms, tiers, now_ms)
    return None if tier is None else tier.spacing_ms


def thinned_bucket(
    at_ms: int, now_ms: int, tiers: Sequence[Tier] = TIERS
) -> tuple[int, int] | None:
    """The thinned bucket [start, end) holding ``at_ms`` after a pass at ``now_ms`` (at its
    coarsest tier), None outside the thinned ranges. Only that bucket's last commit is kept:
    if it is after ``at_ms``, commits of the bucket at or before ``at_ms`` may have gone; if
    no commit of the bucket after ``at_ms`` is kept, none before it went."""
    tier = _thinning_tier(at_ms, tiers, now_ms)
    if tier is None:
        return None
    start = at_ms - at_ms % tier.spacing_ms
    return start, start + tier.spacing_ms


def exact_as_of(at_ms: int, now_ms: int, tiers: Sequence[Tier] = TIERS) -> int:
    """The time up to which an as-of ``at_ms`` answer is exact after a pass at ``now_ms``:
    ``at_ms`` itself outside the thinned ranges; in one, the end of the bucket before
    ``at_ms``'s (commits in ``at_ms``'s bucket before it may have gone). The answer is then
    the group-partition's last commit at or before ``at_ms`` or, if that one went, the last at
    or before this time."""
    tier = _thinning_tier(at_ms, tiers, now_ms)
    if tier is None:
        return at_ms
    return at_ms - at_ms % tier.spacing_ms - 1


def expected_as_of(
    commits: Sequence[Commit], at_ms: int, now_ms: int, tiers: Sequence[Tier] = TIERS
) -> Commit | None:
    """What an as-of ``at_ms`` read of the thinned history answers, from every commit: the
    last at or before ``at_ms`` when it is the last of its bucket or outside the thinned ranges,
    else the last at or before :func:`exact_as_of`."""
    truth = last_at_or_before(commits, at_ms)
    tier = _thinning_tier(at_ms, tiers, now_ms)
    if truth is None or tier is None:
        return truth
    start = at_ms - at_ms % tier.spacing_ms
    in_bucket = [c for c in commits if start <= c.commit_timestamp_ms < start + tier.spacing_ms]
    if truth.commit_timestamp_ms < start or max(in_bucket) == truth:
        return truth
    return last_at_or_before(commits, start - 1)
