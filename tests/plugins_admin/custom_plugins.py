"""A custom scheduling plugin registered by dotted path, as an operator would add one (settings)."""

from scheduling.framework.registry import SCORE, PluginSetting


class TeamAffinity:
    name = "team-affinity"

    def __init__(self, setting: PluginSetting):
        self.label = setting.extra.get("label", "team")

    def score(self, state, task, node) -> float:
        return 100.0 if task.labels.get(self.label) == node.labels.get(self.label) else 0.0


class TeamAffinityFactory:
    """Prefers nodes whose team label matches the task's."""

    name = TeamAffinity.name
    kinds = frozenset({SCORE})
    default = PluginSetting(TeamAffinity.name, enabled=True, weight=3, extra={"label": "team"})

    def __call__(self, setting: PluginSetting) -> TeamAffinity:
        return TeamAffinity(setting)

    @staticmethod
    def validate_extra(extra) -> None:
        if not isinstance(extra.get("label", "team"), str):
            raise ValueError("label must be a string")


team_affinity = TeamAffinityFactory()
