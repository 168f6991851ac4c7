"""One interface per extension point, in the order kube-scheduler runs them (docs/custom-plugins.md):

    PreFilter → Filter → PostFilter (only when no node fits) → PreScore → Score → PostScore (kube's NormalizeScore)
    → Reserve → Permit → Bind

`Framework` (`scheduling/framework/framework.py`) runs every one of them; the cycle calls it. Filters and scorers
come in two shapes: the per-node protocols (`FilterPlugin.filter`, `ScorePlugin.score`) are all a custom plugin
needs; the built-ins also implement the row-batch forms (`RowFilterPlugin.filter_rows`,
`RowScorePlugin.score_rows`), which evaluate many nodes at once over the column view `NodeTable`; the framework
prefers those when present because a cycle at 5,000 nodes cannot afford a Python call per node per plugin.
"""

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.framework.status import Status

if TYPE_CHECKING:
    import numpy as np

    from scheduling.framework.table import NodeTable


class CycleState(dict):
    """Data the plugins of one attempt share (PreScore computes, Filter/Score read). Keyed by plugin name.

    `config` and `tenancy` are the attempt's scheduler figures and share groups; `handle` is what the caller
    lends plugins that act on the cluster (the cycle's preemption handle for PostFilter; None elsewhere).
    """

    def __init__(self, config: SchedulerConfig | None = None, tenancy: TenancyView | None = None,
                 handle: Any = None) -> None:
        super().__init__()
        self.config = config if config is not None else SchedulerConfig()
        self.tenancy = tenancy if tenancy is not None else TenancyView()
        self.handle = handle


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Admits the task before any node is looked at; a failing Status ends the attempt (its `attempt_code`, if
    set, is the attempt's code)."""

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status: ...


class PostFilterOutcome(Protocol):
    """What a PostFilter did for a task no node could take: the attempt's code, message and extra diagnostics."""

    code: str
    message: str
    diagnostics: dict[str, Any]


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs when Filter left no node (`result.node is None`): may act so that the task fits later (preemption).
    None means it has nothing to offer; the first outcome wins."""

    def post_filter(self, state: CycleState, task: TaskInfo, result: Any,
                    snapshot: ClusterSnapshot) -> PostFilterOutcome | None: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class RowFilterPlugin(Plugin, Protocol):
    """`reasons[k - 1]` is the reason for code k; `filter_rows` returns one code per row, 0 = passes.
    `resolvable` are the reasons freeing resources can cure (the rest are unresolvable); `attempt_codes` maps a
    reason to the attempt code an attempt rejected for it gets (reasons.*) instead of the derived one."""

    reasons: tuple[str, ...]
    resolvable: frozenset[str]
    attempt_codes: Mapping[str, str]

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
class RowPostScorePlugin(Plugin, Protocol):
    """PostScore over the feasible rows: the totals to use instead of `totals` (one per row of `rows`, in order)."""

    def post_score_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray",
                        totals: "np.ndarray") -> "np.ndarray": ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Chooses the cards of `task` on the chosen `node`; None leaves the choice to the next Reserve plugin and
    finally to the built-in one (fewest active tasks, lowest index)."""

    def reserve(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> list[int] | None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Approves a batch of placements that must bind together (one task, or a gang's every member); a failing
    Status keeps every task of it pending."""

    def permit(self, state: CycleState, placements: Sequence[tuple[TaskInfo, NodeInfo, list[int]]],
               world_size: int) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Binds a placement: Status SKIP hands it to the next binder and finally to the default one (the bind
    pipeline, `scheduling/bind/`); SUCCESS means the plugin bound it; a failure leaves the task pending."""

    def bind(self, state: CycleState, task: TaskInfo, node: NodeInfo, cards: list[int]) -> Status: ...


class RowPlugin:
    """Base of the built-in plugins: the per-node entry points run the row code on a one-node table, so each
    rule is written once."""

    name = ""
    reasons: tuple[str, ...] = ()
    resolvable: frozenset[str] = frozenset()
    attempt_codes: Mapping[str, str] = {}
    # Whether `filter_rows` / `score_rows` read usage (GPUs in use, card occupancy and memory, load): False lets a
    # shared result skip the rows whose usage alone changed (`table.static_signature`).
    follows_usage = True

    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status:
        import numpy as np

        from scheduling.framework.table import single_row_table

        code = int(self.filter_rows(state, task, single_row_table(node, state.config), np.zeros(1, np.int64))[0])
        if code == 0:
            return Status(plugin=self.name)
        reason = self.reasons[code - 1]
        return Status.unschedulable(reason, plugin=self.name, unresolvable=reason not in self.resolvable,
                                    attempt_code=self.attempt_codes.get(reason, ""))

    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float:
        import numpy as np

        from scheduling.framework.table import single_row_table

        return float(self.score_rows(state, task, single_row_table(node, state.config), np.zeros(1, np.int64))[0])

    def filter_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        raise NotImplementedError

    def filter_key(self, task: TaskInfo, table: "NodeTable") -> Hashable | None:
        """The task's equivalence class for `filter_rows` (`scheduling.framework.equivalence`): the values of the
        task fields a row's code depends on, so tasks with equal keys share the codes within a snapshot. Only for a
        rule whose code for a row depends on nothing but those fields, that row, the config and the share groups.
        The table is there for keys that depend on what kinds of node it holds (`table.all_uniform`).
        `equivalence.EVERY_ROW_PASSES`: the rule asks nothing of this task. None (the default): not shared."""
        return None

    def score_key(self, task: TaskInfo, table: "NodeTable") -> Hashable | None:
        """`filter_key`, for `score_rows`."""
        return None

    def score_rows(self, state: CycleState, task: TaskInfo, table: "NodeTable", rows: "np.ndarray") -> "np.ndarray":
        raise NotImplementedError

    def summary_note(self, task: TaskInfo, chosen: NodeInfo) -> str:
        """What the attempt's summary line adds about the chosen node ("" for nothing)."""
        return ""


def label_is(labels: dict[str, str], key: str, value: str) -> bool:
    return str(labels.get(key, "")).strip().lower() == value
