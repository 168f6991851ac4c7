"""The autoscaling metric of each replica (design §17.2), as the agent reports it with its heartbeat: from the
replica's Prometheus text `/metrics` for `requests_per_second` and `queue_length`, from the vendor tool's card
utilisation for `gpu_utilization`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

GPU_UTILIZATION = "gpu_utilization"
# `name{labels} value [timestamp]` (the Prometheus text exposition format, version 0.0.4).
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+-?\d+)?\s*$")


def prometheus_value(text: str, name: str) -> float | None:
    """The sum of the samples named `name` (over all their label sets), None when there is none; comments, other
    metrics and values that are not finite numbers are passed over."""
    total, found = 0.0, False
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or match.group(1) != name:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            total, found = total + value, True
    return total if found else None


def gpu_utilization(cards: Iterable, gpu_type: str | None, indexes: Iterable[int]) -> float | None:
    """The mean utilisation (percent) of the replica's cards as the vendor tool read them now."""
    wanted = set(indexes)
    readings = [card.utilization for card in cards if card.index in wanted and card.utilization is not None
                and (gpu_type is None or card.type == gpu_type)]
    return sum(readings) / len(readings) if readings else None

