"""replica-spread (always on; design §17.2): an inference group's `spread: {across: node|rack|zone, max_skew, hard}`
places its replicas evenly over that key, as Kubernetes' topology spread constraints do. A domain's skew is how many
more replicas it would hold with this one than the emptiest domain of the nodes that could ever take the replica
(online, schedulable, with enough cards of its type), whether or not they have room now. `hard`: a filter
refusing a node where the skew would exceed `max_skew` (its reason counted in the attempt's summary line), and a node
without the key; otherwise a score, highest in the emptiest domains. A task of no spread group is left alone."""

import numpy as np

from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.group_spread import GroupSpread, domain_of
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.occupancy import INFERENCE
from scheduling.framework.registry import FILTER, PRE_FILTER, SCORE, PluginSetting, PluginSpec
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.status import Status
from scheduling.framework.table import NodeTable

NAME = "replica-spread"
SPREAD_SKEW = "SpreadSkew"
NO_SPREAD_KEY = "SpreadKeyMissing"


class ReplicaSpread(RowPlugin):
    name = NAME
    reasons = (SPREAD_SKEW, NO_SPREAD_KEY)
    # A skew refusal is cured by the group's other replicas landing elsewhere, not by evicting anything here.
    resolvable = frozenset()

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        spread = snapshot.group_spread.get(task.group_id) if task.group_id is not None else None
        if spread is not None:
            state[NAME] = (spread, _least(spread, task, snapshot))
        return Status(plugin=self.name)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        spread, least = state.get(NAME, (None, 0))
        if spread is None or not spread.hard:
            return codes
        domains, counts = _counts(spread, table, rows)
        codes[(counts + 1 - least) > spread.max_skew] = 1
        codes[np.array([not domain for domain in domains], bool)] = 2
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable):
        return None if _may_spread(task) else EVERY_ROW_PASSES

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        spread, least = state.get(NAME, (None, 0))
        if spread is None or not len(rows):
            return np.zeros(len(rows))
        domains, counts = _counts(spread, table, rows)
        most = int(counts.max())
        scores = 100.0 * (most - counts) / (most - least) if most > least else np.full(len(rows), 100.0)
        scores[np.array([not domain for domain in domains], bool)] = 0.0
        return scores

    def score_key(self, task: TaskInfo, table: NodeTable):
        return None if _may_spread(task) else ()


def _may_spread(task: TaskInfo) -> bool:
    return task.group_id is not None and task.type == INFERENCE


def _least(spread: GroupSpread, task: TaskInfo, snapshot: ClusterSnapshot) -> int:
    """The fewest replicas any domain holds among the nodes that could ever take the task."""
    domains = {domain_of(node, spread.across) for node in snapshot.nodes
               if node.status == "online" and node.schedulable and node.gpu_total >= task.gpu_required
               and (not task.gpu_type or node.gpu_type == task.gpu_type)}
    domains.discard("")
    return min((spread.counts.get(domain, 0) for domain in domains), default=0)


def _counts(spread: GroupSpread, table: NodeTable, rows: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Each row's domain and the replicas its domain holds."""
    domains = [domain_of(table.nodes[row], spread.across) for row in rows.tolist()]
    return domains, np.array([spread.counts.get(domain, 0) for domain in domains], np.int64)


def factory(setting: PluginSetting) -> ReplicaSpread:
    return ReplicaSpread()


SPEC = PluginSpec(NAME, factory, always_on=True, default=PluginSetting(NAME, True, 2),
                  kinds=frozenset({PRE_FILTER, FILTER, SCORE}),
                  description="Places an inference group's replicas evenly over nodes, racks or zones when the group "
                              "asks for it (`spread`).")
