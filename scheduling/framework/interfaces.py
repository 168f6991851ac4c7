"""One interface per extension point (SPEC §4: PreScore → Filter → Score → PostScore → Bind).

Filters and scorers come in two shapes. The per-node protocols (`FilterPlugin.filter`, `ScorePlugin.score`) are
all a custom plugin needs. The built-ins also implement the row-batch forms (`RowFilterPlugin.filter_rows`,
`RowScorePlugin.score_rows`), which evaluate many nodes at once over the column view `NodeTable`; the framework
prefers those when present because a cycle at 5,000 nodes cannot afford a Python call per node per plugin.
"""

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.framework.status import Status

if TYPE_CHECKING:
    import numpy as np

    from scheduling.framework.table import NodeTable


class CycleState(dict):
    """Data the plugins of one attempt share (PreScore computes, Filter/Score read). Keyed by plugin name.

    `config` and `tenancy` are the attempt's scheduler figures and share groups.
    """

    def __init__(self, config: SchedulerConfig | None = None, tenancy: TenancyView | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else SchedulerConfig()
        self.tenancy = tenancy if tenancy is not None else TenancyView()


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
class RowFilterPlugin(Plugin, Protocol):
    """`reasons[k - 1]` is the reason for code k; `filter_rows` returns one code per row, 0 = passes."""

    reasons: tuple[str, ...]

    def filter_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float: ...


@runtime_checkable
class RowScorePlugin(Plugin, Protocol):
    def score_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        ...


@runtime_checkable
class PostScorePlugin(Plugin, Protocol):
    def post_score(self, state: CycleState, task: TaskInfo, totals: dict[int, float]) -> None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status: ...


PluginArgs = dict[str, Any]


class RowPlugin:
    """Base of the built-in plugins: the per-node entry points run the row code on a one-node table, so each
    rule is written once."""

    name = ""
    reasons: tuple[str, ...] = ()

    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status:
        import numpy as np

        from scheduling.framework.reasons import RESOLVABLE
        from scheduling.framework.table import single_row_table

        code = int(self.filter_rows(state, task, single_row_table(node, state.config), np.zeros(1, np.int64))[0])
        if code == 0:
            return Status(plugin=self.name)
        reason = self.reasons[code - 1]
        return Status.unschedulable(reason, plugin=self.name, unresolvable=reason not in RESOLVABLE)

    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float:
        import numpy as np

        from scheduling.framework.table import single_row_table

        return float(self.score_rows(state, task, single_row_table(node, state.config), np.zeros(1, np.int64))[0])

    def filter_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        raise NotImplementedError

    def score_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        raise NotImplementedError


def label_is(labels: dict[str, str], key: str, value: str) -> bool:
    return str(labels.get(key, "")).strip().lower() == value
