"""The fault schedule: every kind at least once, after the warm-up and before the quiet end, seeded."""

import pytest

from scheduling.soak.faults import KINDS, schedule


@pytest.mark.parametrize("minutes", [1, 8, 60])
def test_every_kind_comes_at_least_once_inside_the_loaded_part(minutes):
    planned = schedule(list(KINDS), minutes=minutes, seed=3)

    assert {kind for _, kind in planned} == set(KINDS)
    assert all(45 <= at <= max(60, minutes * 60 - 75) for at, _ in planned)
    assert [at for at, _ in planned] == sorted(at for at, _ in planned)


def test_the_same_seed_gives_the_same_schedule_and_long_runs_repeat_the_kinds():
    assert schedule(list(KINDS), minutes=8, seed=3) == schedule(list(KINDS), minutes=8, seed=3)
    assert schedule(list(KINDS), minutes=8, seed=3) != schedule(list(KINDS), minutes=8, seed=4)
    assert len(schedule(list(KINDS), minutes=60, seed=3)) > len(KINDS)
