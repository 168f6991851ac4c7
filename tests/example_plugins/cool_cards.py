"""cool-cards: an example custom plugin (docs/custom-plugins.md).

Filter: rejects nodes whose every card runs at or above `max_temperature` °C. Score: cooler nodes score higher
(100 − the mean card temperature). It uses only the per-node interfaces a custom plugin needs.
"""

from collections.abc import Mapping
from typing import Any

from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import FILTER, SCORE, PluginSetting
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.status import Status

NAME = "cool-cards"
TOO_HOT = "all cards too hot"


class CoolCards:
    name = NAME

    def __init__(self, max_temperature: float) -> None:
        self.max_temperature = max_temperature

    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status:
        if node.cards and all(card.temperature >= self.max_temperature for card in node.cards):
            return Status.unschedulable(TOO_HOT, plugin=NAME)
        return Status(plugin=NAME)

    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float:
        if not node.cards:
            return 50.0
        return 100.0 - sum(card.temperature for card in node.cards) / len(node.cards)


class CoolCardsFactory:
    name = NAME
    kinds = frozenset({FILTER, SCORE})
    default = PluginSetting(NAME, enabled=True, weight=2, extra={"max_temperature": 75})

    def __call__(self, setting: PluginSetting) -> CoolCards:
        return CoolCards(max_temperature=setting.extra.get("max_temperature", 75))

    @staticmethod
    def validate_extra(extra: Mapping[str, Any]) -> None:
        value = extra.get("max_temperature", 75)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 120:
            raise ValueError("max_temperature must be a number of °C between 0 and 120")


factory = CoolCardsFactory()
