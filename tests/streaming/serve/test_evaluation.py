"""Burrow's evaluation rules, each status reached by a crafted window of commits."""

from __future__ import annotations

import pytest

from streaming.serve.evaluation import (
    ConsumerOffset,
    PartitionStatus,
    Status,
    group_status,
    partition_status,
)

NOW = 1_000_000


def window(*points: tuple[int, int | None], start: int = NOW - 100_000, step: int = 10_000):
    """Commits (offset, lag) every ``step`` ms from ``start``."""
    return [
        ConsumerOffset(offset, start + i * step, start + i * step, lag)
        for i, (offset, lag) in enumerate(points)
    ]


def status_of(points: list[ConsumerOffset], current_lag: int, log_ends: list[int] = ()) -> Status:
    return partition_status("t", 0, points, current_lag, list(log_ends), NOW, intervals=10).status


# The window spans 90 s and its last commit is 10 s old: not stopped.
MOVING = [(100 + 10 * i, 5) for i in range(10)]


def test_ok_when_the_current_lag_is_zero_whatever_the_window() -> None:
    rewinding = window(*[(100 - i, 50) for i in range(10)])
    assert status_of(rewinding, current_lag=0) == Status.OK


def test_ok_when_some_commit_of_the_window_had_no_lag() -> None:
    points = window(*[(100 + i, 0 if i == 4 else 7) for i in range(10)])
    assert status_of(points, current_lag=7) == Status.OK


def test_stop_when_the_last_commit_is_older_than_the_window_is_long() -> None:
    # Ten commits 1 s apart, the last one 60 s ago.
    points = window(*MOVING, start=NOW - 69_000, step=1_000)
    assert status_of(points, current_lag=5) == Status.STOP
    # ...unless a recent log-end offset shows the consumer had caught up.
    assert status_of(points, current_lag=5, log_ends=[150, 190]) == Status.WARN


def test_rewind_when_an_offset_goes_back() -> None:
    points = window(*[(100 + i, 10) for i in range(5)], (50, 60), *[(51 + i, 60) for i in range(4)])
    assert status_of(points, current_lag=60) == Status.REWIND


def test_stall_when_the_offset_never_moves_under_lag() -> None:
    points = window(*[(100, 10 + i) for i in range(10)])
    assert status_of(points, current_lag=20) == Status.STALL


def test_warn_when_offsets_move_but_the_lag_never_decreases() -> None:
    points = window(*[(100 + i, 10 + i) for i in range(10)])
    assert status_of(points, current_lag=20) == Status.WARN


def reason_of(points: list[ConsumerOffset], current_lag: int) -> str:
    return partition_status("t", 0, points, current_lag, [], NOW, intervals=10).reason


def test_each_status_says_which_rule_gave_it_and_since_when() -> None:
    # The quickstart's group: one commit, 5m12s ago, 40 behind.
    once = [ConsumerOffset(10, NOW - 312_000, NOW - 312_000, 40)]
    assert reason_of(once, 40) == "STOP: no commit for 5m12s while 40 behind (one commit seen)"
    stopped = window(*MOVING, start=NOW - 69_000, step=1_000)
    assert reason_of(stopped, 5) == (
        "STOP: no commit for 1m00s while 5 behind (longer than the 9s its last 10 commits span)"
    )
    rewound = window(*[(100 + i, 10) for i in range(5)], *[(50 + i, 60) for i in range(5)])
    assert reason_of(rewound, 60) == "REWIND: offset went back from 104 to 50 50s ago"
    stalled = window(*[(100, 10 + i) for i in range(10)])
    assert reason_of(stalled, 20) == (
        "STALL: offset 100 unchanged over its last 10 commits (1m40s) while 20 behind"
    )
    warned = window(*[(100 + i, 10 + i) for i in range(10)])
    assert reason_of(warned, 20) == (
        "WARN: lag never fell over its last 10 commits (10 to 19) in 1m30s: falling behind"
    )
    assert reason_of(warned, 0) == "OK: caught up (lag 0)"
    group = group_status(
        "local",
        "g",
        [
            partition_status("t", 0, stopped, 5, [], NOW),
            partition_status("t", 1, stalled, 20, [], NOW),
            partition_status("t", 2, warned, 0, [], NOW),
        ],
    )
    # The worst partition (STALL outranks STOP in Burrow's order), and how many others.
    assert group.reason == (
        "ERR: t-1 STALL: offset 100 unchanged over its last 10 commits (1m40s) while 20 behind;"
        " 1 other partition(s) not OK"
    )


def test_ok_when_the_lag_goes_down_somewhere() -> None:
    points = window(*[(100 + i, 10 + i) for i in range(9)], (200, 3))
    assert status_of(points, current_lag=3) == Status.OK


def test_a_partial_window_counts_as_incomplete() -> None:
    evaluated = partition_status("t", 0, window((1, 3), (2, 3)), 3, [], NOW, intervals=10)
    assert evaluated.complete == pytest.approx(0.2)
    assert evaluated.start is not None and evaluated.start.offset == 1
    assert evaluated.end is not None and evaluated.end.offset == 2
    empty = partition_status("t", 1, [], 0, [], NOW)
    assert (empty.status, empty.start, empty.complete) == (Status.OK, None, 0.0)


def _partition(status: Status, lag: int, complete: float = 1.0) -> PartitionStatus:
    return PartitionStatus("t", lag, status, lag, complete)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Status.OK, Status.OK], Status.OK),
        ([Status.OK, Status.WARN], Status.WARN),
        ([Status.WARN, Status.STOP], Status.ERR),
        ([Status.STALL], Status.ERR),
        ([Status.REWIND, Status.OK], Status.ERR),
    ],
)
def test_the_group_is_its_worst_partition_with_errors_as_err(
    statuses: list[Status], expected: Status
) -> None:
    partitions = [_partition(s, lag) for lag, s in enumerate(statuses)]
    evaluated = group_status("local", "g", partitions)
    assert evaluated.status == expected
    assert evaluated.totallag == sum(range(len(statuses)))
    assert evaluated.maxlag is partitions[-1]


def test_group_completeness_and_problem_partitions_in_burrows_shape() -> None:
    partitions = [_partition(Status.OK, 0), _partition(Status.WARN, 4, complete=0.5)]
    shown = group_status("local", "g", partitions).as_burrow(only_problems=True)
    assert shown["complete"] == 0.5
    assert shown["partition_count"] == 2
    assert [p["status"] for p in shown["partitions"]] == ["WARN"]
    assert shown["maxlag"]["current_lag"] == 4
    assert group_status("local", "g", []).as_burrow(only_problems=False)["complete"] == 0.0


def test_commits_whose_lag_was_not_sampled_leave_the_warn_rule_out() -> None:
    # Moving offsets, some lags unknown (committed before serve read the log end): the lag
    # may have fallen there, so "never fell" cannot be said.
    unknown = window(*[(100 + i, None) for i in range(10)])
    assert status_of(unknown, current_lag=20) == Status.OK
    partly = window(*[(100 + i, None if i < 8 else 10 + i) for i in range(10)])
    assert status_of(partly, current_lag=20) == Status.OK
    # The other rules need no lag: a window of unsampled commits still stalls and rewinds.
    assert status_of(window(*[(100, None)] * 10), current_lag=20) == Status.STALL
    rewound = window((100, None), (90, None), start=NOW - 20_000)
    assert status_of(rewound, current_lag=20) == Status.REWIND
