"""design §17.2: the autoscaler's rule (Kubernetes HPA's) on recorded series, one value per ready replica every 15 s
tick: steady load, a spike, flapping within 10 % of the target, and the scale-down delay."""

from datetime import UTC, datetime, timedelta

from scheduling.groups.autoscale_rule import TICK_SECONDS, decide

SPEC = {"min": 1, "max": 10, "metric": "requests_per_second", "target": 100, "scale_down_delay_seconds": 300}
START = datetime(2026, 12, 5, tzinfo=UTC)


def replay(load_per_tick, *, replicas=2, spec=SPEC):
    """The replica count after each tick when the total load (spread evenly over the replicas) follows the series;
    every replica is ready at once."""
    history, counts = [], []
    for tick, load in enumerate(load_per_tick):
        now = START + timedelta(seconds=TICK_SECONDS * tick)
        values = [load / replicas] * replicas
        decision = decide(current=replicas, values=values, spec=spec, history=history,
                          watched_since=history[0][0] if history else None, now=now)
        history.append((now, decision.proposed))
        replicas = decision.desired
        counts.append(replicas)
    return counts


def test_steady_load_holds_the_count_that_meets_the_target():
    assert replay([400] * 40, replicas=4) == [4] * 40
    assert set(replay([400] * 40, replicas=2)) == {4}  # up at once, then steady


def test_a_spike_scales_up_at_once_and_down_only_after_the_delay():
    series = [200] * 4 + [800] * 4 + [200] * 40
    counts = replay(series)
    assert counts[:4] == [2] * 4
    assert counts[4] == 8  # up on the first tick that sees it
    # Down only once the last 300 s (20 ticks) asked for no more than 2: the spike's last tick is tick 7.
    down_at = counts.index(2, 5)
    assert down_at == 7 + 300 // TICK_SECONDS
    assert all(count == 8 for count in counts[4:down_at])


def test_flapping_within_10_percent_changes_nothing():
    # 4 replicas at 100 per replica: ±9 % either way.
    assert replay([436, 364] * 30, replicas=4) == [4] * 60
    # 11 % over the target is a change.
    assert replay([444] * 2, replicas=4)[0] == 5


def test_a_scale_down_waits_for_the_delay_even_at_the_start_and_takes_the_highest_of_the_window():
    spec = {**SPEC, "scale_down_delay_seconds": 60}
    counts = replay([100] * 3 + [300] + [100] * 10, replicas=5, spec=spec)
    # Nothing goes down before 60 s of history (tick 4); tick 3 asked for 3, so down to 3 until it leaves the
    # window (tick 7), then to 1.
    assert counts[:8] == [5, 5, 5, 5, 3, 3, 3, 1]
    assert counts[-1] == 1


def test_bounds_hold_whatever_the_metric_says():
    assert replay([5000] * 3, replicas=2) == [10, 10, 10]
    assert replay([0] * 30, replicas=2, spec={**SPEC, "min": 2}) == [2] * 30


def test_no_report_keeps_the_count():
    assert decide(current=3, values=[], spec=SPEC, history=[], watched_since=START, now=START).desired == 3
