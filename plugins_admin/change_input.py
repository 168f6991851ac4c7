"""The plugin API's request shapes, shared by the plugin endpoints, the what-if preview and the page's preview."""

from typing import Any

from rest_framework import serializers

from heteroflow_site.serializers import StrictSerializer, validated
from plugins_admin.api_schema import change_rules
from plugins_admin.rules import MAX_WEIGHT, MIN_WEIGHT, PluginChangeRequest

PLUGIN_ACTIONS = {"enable": True, "disable": False}
# A preview names each plugin at most a few times; a longer list is a mistake, not a plan.
MAX_CHANGES = 50


class PluginSettingsInput(StrictSerializer):
    """`PUT /api/v1/plugins/{name}`: a new weight and/or new settings."""

    weight = serializers.IntegerField(required=False, min_value=MIN_WEIGHT, max_value=MAX_WEIGHT)
    extra = serializers.DictField(required=False)

    # The fields a body has at least (PluginDetailApi.put refuses an empty one).
    min_fields = 1

    @classmethod
    def request_schema(cls, schema: dict) -> dict:
        return {**schema, "minProperties": cls.min_fields}


class PluginChangeInput(PluginSettingsInput):
    """One entry of a list of changes: the plugin, and its switch (`action`) and/or its update."""

    name = serializers.CharField(max_length=200)
    action = serializers.ChoiceField(choices=list(PLUGIN_ACTIONS), required=False)

    # `name` and something to do with it.
    min_fields = 2

    @classmethod
    def request_schema(cls, schema: dict) -> dict:
        return change_rules(super().request_schema(schema))

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not {"action", "weight", "extra"} & data.keys():
            raise serializers.ValidationError("send action, weight and/or extra")
        return data


def plugin_change_requests(data: Any) -> list[PluginChangeRequest]:
    """A list of changes in the plugin API's shapes (`[{"name": "binpack", "action": "enable"}, {"name": "nvlink",
    "weight": 3}]`), checked field by field; a 400 names the entry and field (`[1].weight`)."""
    entries = validated(PluginChangeInput, data, many=True, max_length=MAX_CHANGES)
    return [PluginChangeRequest(name=entry["name"], enabled=PLUGIN_ACTIONS.get(entry.get("action")),
                                weight=entry.get("weight"), extra=entry.get("extra")) for entry in entries]
