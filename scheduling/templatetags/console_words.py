"""The console's words for what the code calls by its own names: relative times an admin reads at a glance, memory
in GB, and the scheduling stages a plugin acts in."""

from datetime import datetime

from django import template
from django.utils import timezone

from scheduling.framework import registry

register = template.Library()

STAGE_WORDS = {
    registry.PRE_FILTER: "prepares the check",
    registry.FILTER: "rules nodes out",
    registry.POST_FILTER: "acts when nothing fits",
    registry.PRE_SCORE: "prepares the ranking",
    registry.SCORE: "ranks nodes",
    registry.POST_SCORE: "adjusts the ranking",
    registry.RESERVE: "reserves",
    registry.PERMIT: "admits",
    registry.BIND: "binds",
    registry.QUEUE_SORT: "orders the queue",
    registry.CONFIG: "settings",
}
_UNITS = ((86400, "d"), (3600, "h"), (60, "min"))



@register.filter
def stage_words(kind: str) -> str:
    return STAGE_WORDS.get(kind, kind.replace("_", " "))


@register.filter
def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """"12 s ago", "4 min ago", "3 h 5 min ago", "2 d 4 h ago": the largest two units, never "0 minutes ago"."""
    if moment is None:
        return "never"
    seconds = int(((now or timezone.now()) - moment).total_seconds())
    if seconds < 0:
        return "just now"
    if seconds < 60:
        return f"{seconds} s ago"
    for position, (size, unit) in enumerate(_UNITS):
        if seconds >= size:
            words = f"{seconds // size} {unit}"
            if unit != "min":
                smaller, smaller_unit = _UNITS[position + 1]
                if seconds % size >= smaller:
                    words += f" {seconds % size // smaller} {smaller_unit}"
            return f"{words} ago"
    return f"{seconds} s ago"


@register.filter
def gb(megabytes: int | None) -> str:
    """Memory the agents report in MiB as GB (binary, as a node's `memory_gb`), short enough for a narrow cell: "80",
    "19.5", "0.5", "121" (no decimal from 100 up)."""
    if megabytes is None:
        return "—"
    value = megabytes / 1024
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}".removesuffix(".0")
