"""topology: placement preference by the task's `region` / `zone` / `rack` labels (design §6).

Base 50; the node matches region +5, zone +15, rack +10, each independent (max 80). A node field left empty adds
nothing. The `topology: required` hard constraint is the built-in affinity filter's.
"""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NO_CODE, NodeTable

NAME = "topology"
BASE = 50.0
BONUS = {"region": 5.0, "zone": 15.0, "rack": 10.0}


class Topology(RowPlugin):
    name = NAME
    follows_usage = False

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        scores = np.full(len(rows), BASE)
        columns = {"region": (table.region, table.regions), "zone": (table.zone, table.zones),
                   "rack": (table.rack, table.racks)}
        for field, (column, vocabulary) in columns.items():
            wanted = str(task.labels.get(field, "")).strip()
            code = vocabulary.lookup(wanted)
            if code != NO_CODE:
                scores[column[rows] == code] += BONUS[field]
        return scores

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return tuple(str(task.labels.get(field, "")).strip() for field in BONUS)


def factory(setting: PluginSetting) -> Topology:
    return Topology()


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 1), kinds=frozenset({SCORE}),
                  settings_schema=no_settings(),
                  description="Prefers the region, zone and rack a task asks for; topology: required makes them "
                              "hard limits.")
