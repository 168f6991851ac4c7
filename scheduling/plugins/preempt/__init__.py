"""preempt: configuration only. Its `preempt_stage` (disabled|scheduled|running) tells the preemption planner
(SPEC §9) which victims' states are allowed; the plugin set exposes it as `PluginSet.preempt_stage`."""

from dataclasses import dataclass

from scheduling.framework.registry import PluginSetting

NAME = "preempt"
DEFAULT_STAGE = "running"


@dataclass(frozen=True)
class Preempt:
    preempt_stage: str = DEFAULT_STAGE
    name: str = NAME


def factory(setting: PluginSetting) -> Preempt:
    return Preempt(preempt_stage=setting.extra.get("preempt_stage", DEFAULT_STAGE))
