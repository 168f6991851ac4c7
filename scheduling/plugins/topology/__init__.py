"""topology: placement preference by the task's `region` / `zone` / `rack` labels (design §6).

Base 50; the node matches region +5, zone +15, rack +10, each independent (max 80). A node field left empty adds
nothing. The `topology: required` hard constraint is the built-in affinity filter's.

PreScore reads once per task what it asks for (its `region`, `zone` and `rack` labels, trimmed) into the attempt's
CycleState; Score compares each node with that.
"""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import PRE_SCORE, SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.status import Status
from scheduling.framework.table import NO_CODE, NodeTable

NAME = "topology"
BASE = 50.0
BONUS = {"region": 5.0, "zone": 15.0, "rack": 10.0}


def wanted(task: TaskInfo) -> dict[str, str]:
    """The region, zone and rack the task asks for ("" where it names none)."""
    return {field: str(task.labels.get(field, "")).strip() for field in BONUS}


class Topology(RowPlugin):
    name = NAME
    follows_usage = False

    def pre_score(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        state[NAME] = wanted(task)
        return Status(plugin=NAME)

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        scores = np.full(len(rows), BASE)
        columns = {"region": (table.region, table.regions), "zone": (table.zone, table.zones),
                   "rack": (table.rack, table.racks)}
        for field, value in state[NAME].items():
            column, vocabulary = columns[field]
            code = vocabulary.lookup(value)
            if code != NO_CODE:
                scores[column[rows] == code] += BONUS[field]
        return scores

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        # What PreScore prepares, all the scores depend on.
        return tuple(wanted(task).values())


def factory(setting: PluginSetting) -> Topology:
    return Topology()


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 1), kinds=frozenset({PRE_SCORE, SCORE}),
                  settings_schema=no_settings(),
                  description="Prefers the region, zone and rack a task asks for; topology: required makes them "
                              "hard limits.")
