"""model-locality (design §17.2, model distribution; the seed's pre-filter "模型分布"): prefer the nodes that
already hold what the task needs before it can serve — its model artifact (an inference group's `model`) and its
container image — as their agents report them (`heteroflow.io/models`, `heteroflow.io/images`).

Score: 100 × the share of the task's named artifacts the node holds (a model and an image: 50 each); a task that
names neither scores 0 everywhere, so nothing changes for it. The attempt's summary line says where the chosen node
lacks them: a pull to come before the replica serves.
"""

from functools import lru_cache

import numpy as np

from nodes.artifacts_label import IMAGES_LABEL, MODELS_LABEL, decode_names, image_name
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import SCORE, PluginSetting, PluginSpec
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.table import NodeTable

NAME = "model-locality"


@lru_cache(maxsize=4096)
def _held(text: str | None) -> frozenset[str]:
    return decode_names(text)


def _wanted(task: TaskInfo) -> list[tuple[str, str]]:
    """(label, name) of each artifact the task names."""
    wanted = []
    if task.model:
        wanted.append((MODELS_LABEL, task.model))
    if task.image:
        wanted.append((IMAGES_LABEL, image_name(task.image)))
    return wanted


def missing_on(node: NodeInfo, task: TaskInfo) -> list[str]:
    """The task's artifacts the node does not hold."""
    return [name for label, name in _wanted(task) if name not in _held(node.labels.get(label))]


class ModelLocality(RowPlugin):
    name = NAME
    follows_usage = False

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.model, task.image)

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        wanted = _wanted(task)
        if not wanted:
            return np.zeros(len(rows))
        share = 100.0 / len(wanted)
        return np.array([share * (len(wanted) - len(missing_on(table.nodes[row], task))) for row in rows.tolist()])

    def summary_note(self, task: TaskInfo, chosen: NodeInfo) -> str:
        missing = missing_on(chosen, task)
        if not missing:
            return ""
        return f"{' and '.join(missing)} not yet on {chosen.name}: pulled before it starts."


def factory(setting: PluginSetting) -> ModelLocality:
    return ModelLocality()


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 1), kinds=frozenset({SCORE}),
                  description="Prefers nodes that already hold the task's model artifact and container image.")
