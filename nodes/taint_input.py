"""The one validation of taints (node API and page) and of tolerations and node selectors (task and group
submissions, API and forms), design §16.3; the rules themselves are `nodes.taints`'."""

import copy

from rest_framework import serializers

from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import LABEL_KEY_MAX_LENGTH, LABEL_VALUE_MAX_LENGTH, LABELS_MAX, printable
from nodes.taints import EFFECTS, EQUAL, EXISTS, OPERATORS


def _key(**kwargs) -> serializers.CharField:
    return serializers.CharField(max_length=LABEL_KEY_MAX_LENGTH, validators=[printable], **kwargs)


def _value(**kwargs) -> serializers.CharField:
    return serializers.CharField(max_length=LABEL_VALUE_MAX_LENGTH, allow_blank=True, validators=[printable],
                                 **kwargs)


class TaintInput(StrictSerializer):
    key = _key()
    value = _value(required=False, default="")
    effect = serializers.ChoiceField(choices=EFFECTS)


class TolerationInput(StrictSerializer):
    key = _key(required=False, allow_blank=True, default="")
    operator = serializers.ChoiceField(choices=OPERATORS, required=False, default=EQUAL)
    value = _value(required=False, default="")
    effect = serializers.ChoiceField(choices=("", *EFFECTS), required=False, allow_blank=True, default="")

    @staticmethod
    def request_schema(schema: dict) -> dict:
        """Two shapes, as `validate` has them: Exists (named, without a value) and Equal (the default, with a key)."""
        # Copies: the enum post-processing rewrites each variant's properties in place.
        exists = {"type": "object", "required": ["operator"], "properties": {
            **copy.deepcopy(schema["properties"]), "operator": {"type": "string", "const": EXISTS},
            "value": {"type": "string", "maxLength": 0}}}
        equal = {"type": "object", "required": ["key"], "properties": {
            **copy.deepcopy(schema["properties"]), "operator": {"type": "string", "const": EQUAL}}}
        equal["properties"]["key"]["minLength"] = 1
        return {"description": schema.get("description", ""), "oneOf": [exists, equal]}

    def validate(self, attrs):
        if attrs["operator"] == EXISTS and attrs["value"]:
            raise serializers.ValidationError({"value": "an Exists toleration has no value"})
        if attrs["operator"] == EQUAL and not attrs["key"]:
            raise serializers.ValidationError({"key": "an Equal toleration names its key"})
        return attrs


def taints_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=TaintInput(), max_length=LABELS_MAX, **kwargs)


def tolerations_field(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=TolerationInput(), max_length=LABELS_MAX, **kwargs)


def parse_pool_lines(text: str, *, with_effect: bool) -> list[dict[str, str]]:
    """The forms' one-per-line notation, `key=value:Effect` (taints) or `key=value[:Effect]`, `key[:Effect]` for
    Exists, `*` for every taint (tolerations), as API bodies; the API's validation then judges them."""
    items = []
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if not line:
            continue
        head, _, effect = line.partition(":")
        key, equals, value = head.partition("=")
        item = {"key": key.strip(), "value": value.strip(), "effect": effect.strip()}
        if not with_effect:
            item["operator"] = EQUAL if equals else EXISTS
            if item["key"] == "*":
                item["key"] = ""
        items.append(item)
    return items


def pool_lines(items: list[dict[str, str]]) -> str:
    """`parse_pool_lines`' notation for stored taints or tolerations (to show them in a form)."""
    lines = []
    for item in items:
        head = item.get("key") or "*"
        if item.get("operator", EQUAL) == EQUAL:
            head += f"={item.get('value', '')}"
        lines.append(f"{head}:{item['effect']}" if item.get("effect") else head)
    return "\n".join(lines)
