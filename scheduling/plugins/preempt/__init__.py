"""preempt (PostFilter, design §9): when no node can take a task for lack of room, evict lower-priority preemptible
work so that it fits later. Its setting `preempt_stage` (disabled|scheduled|running) says which victims' states
may be evicted.

The plugin decides whether preemption applies (the attempt's code, the stage); the cycle lends it, through
`CycleState.handle`, the preemption service that finds the candidates, plans the victims and evicts them
(`scheduling.preemption`), since plugins never touch the database.
"""

from typing import Any

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState, PostFilterOutcome
from scheduling.framework.registry import POST_FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo

NAME = "preempt"
STAGES = ("disabled", "scheduled", "running")
DEFAULT_STAGE = "running"
# Only a lack of room is something evicting lower-priority work can cure.
TRIGGER_CODES = frozenset({reasons.NO_SCHEDULABLE_NODES, reasons.INSUFFICIENT_RESOURCES})


class Preempt:
    name = NAME

    def __init__(self, preempt_stage: str = DEFAULT_STAGE) -> None:
        self.preempt_stage = preempt_stage

    def post_filter(self, state: CycleState, task: TaskInfo, result: Any,
                    snapshot: ClusterSnapshot) -> PostFilterOutcome | None:
        if result.code not in TRIGGER_CODES or self.preempt_stage == "disabled" or state.handle is None:
            return None
        return state.handle.preempt(task, result, snapshot, preempt_stage=self.preempt_stage)


def factory(setting: PluginSetting) -> Preempt:
    return Preempt(preempt_stage=setting.extra.get("preempt_stage", DEFAULT_STAGE))


SETTINGS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "preempt_stage": {"type": "string", "enum": list(STAGES), "default": DEFAULT_STAGE,
                      "description": "which victims' states may be evicted"},
}}


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 0, {"preempt_stage": DEFAULT_STAGE}),
                  kinds=frozenset({POST_FILTER}), settings_schema=SETTINGS_SCHEMA,
                  description="Frees cards from lower-priority preemptible tasks when nothing fits.")
