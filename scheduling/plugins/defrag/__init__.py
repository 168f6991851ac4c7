"""defrag (PostFilter, design §16.3, seed 004's rescheduling; off by default): when the reserved job of a GPU type
(`scheduling.queue.reservation`) still finds no node, move a few preemptible batch tasks off the node that may hold
it so that it fits. Settings: `max_moves` (default 4) moves per plan, `moves_per_hour` (default 20) evictions.

The plan is pure (`planner.plan_defrag`); the cycle lends the plugin, through `CycleState.handle`, the service that
finds the movable tasks, keeps the hourly budget and carries the moves out on the §9 arc (`scheduling.preemption.
moves`): each moved task is preempted and nominated on its target, so that the cards there wait for it. The same
service, without acting, answers `GET /api/v1/scheduler/defrag-plan` and the diagnostics page's panel.
"""

from collections.abc import Mapping
from typing import Any

from scheduling.framework.interfaces import CycleState, PostFilterOutcome
from scheduling.framework.registry import POST_FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.plugins.preempt import TRIGGER_CODES

NAME = "defrag"
DEFAULT_MAX_MOVES = 4
DEFAULT_MOVES_PER_HOUR = 20
# Bounds of the settings: a plan of more moves would cost a cycle too much to search.
MAX_MOVES_LIMIT = 8
MOVES_PER_HOUR_LIMIT = 10_000


class Defrag:
    name = NAME

    def __init__(self, max_moves: int = DEFAULT_MAX_MOVES, moves_per_hour: int = DEFAULT_MOVES_PER_HOUR) -> None:
        self.max_moves = max_moves
        self.moves_per_hour = moves_per_hour

    def post_filter(self, state: CycleState, task: TaskInfo, result: Any,
                    snapshot: ClusterSnapshot) -> PostFilterOutcome | None:
        if result.code not in TRIGGER_CODES or state.handle is None or not hasattr(state.handle, "defrag"):
            return None
        return state.handle.defrag(task, result, snapshot, max_moves=self.max_moves,
                                   moves_per_hour=self.moves_per_hour)


def factory(setting: PluginSetting) -> Defrag:
    return Defrag(**settings_of(setting.extra))


def settings_of(extra: Mapping[str, Any]) -> dict[str, int]:
    return {"max_moves": extra.get("max_moves", DEFAULT_MAX_MOVES),
            "moves_per_hour": extra.get("moves_per_hour", DEFAULT_MOVES_PER_HOUR)}


SETTINGS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "max_moves": {"type": "integer", "minimum": 1, "maximum": MAX_MOVES_LIMIT, "default": DEFAULT_MAX_MOVES,
                  "description": "tasks moved by one plan at most"},
    "moves_per_hour": {"type": "integer", "minimum": 0, "maximum": MOVES_PER_HOUR_LIMIT,
                       "default": DEFAULT_MOVES_PER_HOUR, "description": "evictions per hour at most"},
}}


SPEC = PluginSpec(NAME, factory,
                  default=PluginSetting(NAME, False, 0, {"max_moves": DEFAULT_MAX_MOVES,
                                                         "moves_per_hour": DEFAULT_MOVES_PER_HOUR}),
                  kinds=frozenset({POST_FILTER}), settings_schema=SETTINGS_SCHEMA,
                  description="Defragmentation: moves a few preemptible batch tasks to other nodes so that a "
                              "reserved big job waiting for cards fits.")
