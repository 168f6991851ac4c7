"""The autoscaler's rule (design §17.2), Kubernetes HPA's: desired = ceil(Σ value ÷ target) over the ready replicas,
within [min, max]; no change while the metric per replica is within 10 % of the target; up at once; down only to the
highest count the last `scale_down_delay_seconds` asked for (HPA's scale-down stabilisation window), and not before
the autoscaler has watched the group that long. Plain Python: the ticker, the tests and the benchmark run the same
code."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

METRICS = ("requests_per_second", "gpu_utilization", "queue_length")
TOLERANCE = 0.10
TICK_SECONDS = 15


@dataclass(frozen=True)
class Decision:
    desired: int
    # What the metric alone asked for (within bounds), recorded so later scale-downs can look back at it.
    proposed: int
    total: float
    why: str

    def changes(self, current: int) -> bool:
        return self.desired != current


def propose(*, current: int, values: Sequence[float], spec: dict) -> tuple[int, str]:
    """The count the metric asks for now, within [min, max], and why."""
    low, high, target = spec["min"], spec["max"], float(spec["target"])
    if not values:
        return min(max(current, low), high), "no ready replica reports the metric"
    total = sum(values)
    ratio = total / len(values) / target
    if abs(ratio - 1) <= TOLERANCE:
        wanted, why = current, f"within {TOLERANCE:.0%} of the target"
    else:
        wanted, why = math.ceil(round(total / target, 9)), f"ceil({total:g} ÷ {target:g})"
    clamped = min(max(wanted, low), high)
    if clamped != wanted:
        why += f" = {wanted}, held within [{low}, {high}]"
    return clamped, why


def decide(*, current: int, values: Sequence[float], spec: dict, history: Sequence[tuple[datetime, int]],
           watched_since: datetime | None, now: datetime) -> Decision:
    """`history`: (when, proposed) of the earlier ticks; `watched_since`: the first of them."""
    proposed, why = propose(current=current, values=values, spec=spec)
    total = float(sum(values))
    if proposed >= current:
        return Decision(proposed, proposed, total, why)
    delay = timedelta(seconds=spec.get("scale_down_delay_seconds", 300))
    if watched_since is None or now - watched_since < delay:
        return Decision(current, proposed, total, f"{why}; scale-down waits {delay.seconds} s of history")
    window = [count for at, count in history if at > now - delay]
    highest = max([proposed, *window])
    if highest >= current:
        return Decision(current, proposed, total, f"{why}; the last {delay.seconds} s asked for {highest}")
    return Decision(highest, proposed, total, f"{why}; the highest of the last {delay.seconds} s is {highest}")
