"""Events drawn as markers on the dashboard's history charts. The apps above scheduling that record such events
(plugin changes, in `plugins_admin`) add a source here when they load, so the dashboard reads them without
importing an app above its own."""

from collections.abc import Callable
from datetime import datetime

# Each source: the events since a moment, oldest first, as {at, text}.
MARKER_SOURCES: list[Callable[[datetime], list[dict]]] = []


def markers_since(since: datetime) -> list[dict]:
    return sorted((marker for source in MARKER_SOURCES for marker in source(since)), key=lambda marker: marker["at"])
