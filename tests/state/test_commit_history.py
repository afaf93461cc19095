"""The thinning model's bound and its as-of rule (``state.commit_history``)."""

from __future__ import annotations

import pytest

from state.commit_history import (
    DAY,
    HOUR,
    MINUTE,
    SECOND,
    TIERS,
    Commit,
    Tier,
    check_tiers,
    exact_as_of,
    expected_as_of,
    last_at_or_before,
    rows_bound,
    rows_bound_at,
    thin,
)

NOW = 1_800_000_000_000 - 1_800_000_000_000 % DAY + 12 * HOUR


def _every(step_ms: int, since_age: int, to_age: int) -> list[int]:
    return list(range(NOW - to_age, NOW - since_age, step_ms))


def test_a_busy_partition_keeps_at_most_the_bound() -> None:
    # Denser than every tier's spacing over the whole week: each bucket has several commits.
    times = sorted(
        {
            *_every(700, 0, 10 * MINUTE),
            *_every(30 * SECOND, 10 * MINUTE, 2 * HOUR),
            *_every(5 * MINUTE, 2 * HOUR, DAY),
            *_every(30 * MINUTE, DAY, 7 * DAY),
        }
    )
    commits = [Commit(at, i, 0, i) for i, at in enumerate(times)]
    kept = thin(commits, NOW)
    assert rows_bound() == 990
    assert rows_bound() - 10 <= len(kept) <= rows_bound()
    # Thinning again at the same time keeps the same commits.
    assert thin(kept, NOW) == kept


@pytest.mark.parametrize(
    "age_ms", [30 * SECOND, 5 * MINUTE, 10 * MINUTE, 45 * MINUTE, 3 * HOUR, 2 * DAY, 9 * DAY]
)
def test_a_partition_committed_every_second_holds_the_bound_for_its_age(age_ms: int) -> None:
    # Every second for the last 3 hours, every 5 minutes before (finer than those tiers):
    # each bucket the age reaches has a commit. Past the retention, the purge has taken them.
    recent = min(age_ms, 3 * HOUR)
    times = [*_every(5 * MINUTE, recent, age_ms), *_every(SECOND, 0, recent)]
    times = [at for at in times if at >= NOW - 7 * DAY]
    kept = thin([Commit(at, i, 0, i) for i, at in enumerate(times)], NOW)
    bound = rows_bound_at(age_ms)
    assert bound - len(TIERS) <= len(kept) <= bound
    assert rows_bound_at(age_ms + MINUTE) >= bound


def test_the_bound_for_an_age_grows_to_the_weeks() -> None:
    assert rows_bound_at(0) == 1
    assert rows_bound_at(10 * MINUTE) == 602
    assert rows_bound_at(30 * MINUTE) == 622
    assert rows_bound_at(7 * DAY) == rows_bound_at(30 * DAY) == rows_bound() == 990


def test_in_a_thinned_range_the_answer_is_exact_as_of_the_buckets_start() -> None:
    minute = NOW - 3 * HOUR - (NOW - 3 * HOUR) % (10 * MINUTE)  # a 10-minute bucket
    commits = [Commit(minute - 5 * MINUTE, 0, 0, 1), Commit(minute + MINUTE, 1, 0, 2)]
    commits.append(Commit(minute + 9 * MINUTE, 2, 0, 3))
    assert [c.offset for c in thin(commits, NOW)] == [1, 3]
    at = minute + 2 * MINUTE
    assert last_at_or_before(commits, at).offset == 2  # type: ignore[union-attr]
    assert exact_as_of(at, NOW) == minute - 1
    assert expected_as_of(commits, at, NOW).offset == 1  # type: ignore[union-attr]
    # At the bucket's end the kept commit is the one in force: exact.
    assert expected_as_of(commits, minute + 10 * MINUTE - 1, NOW).offset == 3  # type: ignore[union-attr]
    # The current second's bucket is not thinned yet; the one before is.
    assert exact_as_of(NOW + 5, NOW + 10) == NOW + 5
    assert exact_as_of(NOW - 1, NOW + 10) == NOW - SECOND - 1


@pytest.mark.parametrize(
    ("tiers", "message"),
    [
        ((Tier(1, SECOND),), "first tier must start at age 0"),
        ((Tier(0, SECOND), Tier(MINUTE, 1500)), r"tiers\[1\].spacing_ms must be a multiple"),
        ((Tier(0, SECOND), Tier(0, MINUTE)), r"tiers\[1\].from_age_ms must grow"),
    ],
)
def test_bad_tiers_name_the_field(tiers: tuple[Tier, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_tiers(tiers)
    check_tiers(TIERS)
