"""binpack: prefer the most used node, keeping others empty for large tasks. Mutually exclusive with spread."""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable
from scheduling.plugins.spread import mean_usage, usage_key

NAME = "binpack"


class Binpack(RowPlugin):
    name = NAME

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return 100 * mean_usage(task, table, rows)

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return usage_key(task, table)


def factory(setting: PluginSetting) -> Binpack:
    return Binpack()


# Found enabled together with spread or fgd (a stored row, a migration), binpack is the one kept (design §17.1).
SPEC = PluginSpec(NAME, factory, exclusive_with=("spread", "fgd"), precedence=1, default=PluginSetting(NAME, False, 0),
                  kinds=frozenset({SCORE}), settings_schema=no_settings(),
                  description="Prefers the most used nodes, packing tasks to keep whole nodes free.")
