"""The soak's fault schedule (pure: no service runs)."""

from __future__ import annotations

import itertools

import pytest

from tests.soak.faults import plan

KINDS = ["driver", "broker", "postgres", "mirror", "kafka"]
LENGTHS = {"broker": 20.0, "postgres": 15.0, "kafka": 600.0}


def test_long_outages_never_run_into_the_next_fault() -> None:
    faults = plan(7200, KINDS, 2, LENGTHS)
    assert [f.kind for f in faults] == KINDS * 2
    assert [f.number for f in faults] == [1] * 5 + [2] * 5
    for fault, following in itertools.pairwise(faults):
        end = fault.at_s + LENGTHS.get(fault.kind, 0.0)
        assert following.at_s - end > 60, (fault, following)
    last = faults[-1]
    assert faults[0].at_s >= 720 and last.at_s + LENGTHS[last.kind] <= 0.9 * 7200


def test_outages_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        plan(1200, ["kafka"], 2, LENGTHS)
