"""cool-cards: an example custom plugin (docs/custom-plugins.md).

Filter: rejects nodes whose every card runs at or above `max_temperature` °C. Score: cooler nodes score higher
(100 − the mean card temperature). It uses only the per-node interfaces a custom plugin needs.
"""

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
    # Published in the API's schema and checked on every write: a bad value is a 400 naming extra.max_temperature.
    settings_schema = {"type": "object", "additionalProperties": False, "properties": {
        "max_temperature": {"type": "number", "minimum": 1, "maximum": 119, "default": 75,
                            "description": "°C at which a card counts as too hot"},
    }}

    def __call__(self, setting: PluginSetting) -> CoolCards:
        return CoolCards(max_temperature=setting.extra.get("max_temperature", 75))


factory = CoolCardsFactory()
