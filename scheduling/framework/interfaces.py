"""One interface per extension point (SPEC §4: PreScore → Filter → Score → PostScore → Bind)."""

from typing import Any, Protocol, runtime_checkable

from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.status import Status


class CycleState(dict):
    """Data the plugins of one attempt share (PreScore computes, Filter/Score read). Keyed by plugin name."""


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float: ...


@runtime_checkable
class PostScorePlugin(Plugin, Protocol):
    def post_score(self, state: CycleState, task: TaskInfo, totals: dict[int, float]) -> None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status: ...


PluginArgs = dict[str, Any]
