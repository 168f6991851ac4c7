"""The one validation of taints (node API and page) and of tolerations and node selectors (task and group
submissions, API and forms), design §16.3; the rules themselves are `nodes.taints`'."""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from heteroflow_site.errors import NotAllowed
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

    def validate(self, attrs):
        # Rules across fields, which the schema leaves to the API: refused as a rule's 403, not a 400 (api_errors).
        if attrs["operator"] == EXISTS and attrs["value"]:
            raise serializers.ValidationError({"value": ErrorDetail("an Exists toleration has no value",
                                                                    code=NotAllowed.code)})
        if attrs["operator"] == EQUAL and not attrs["key"]:
            raise serializers.ValidationError({"key": ErrorDetail("an Equal toleration names its key",
                                                                  code=NotAllowed.code)})
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
