"""The API's request bodies: exactly the JSON the schema describes.

A StrictSerializer refuses what DRF would quietly accept or fix: unknown fields (the schema says
`additionalProperties: false`) and values of another JSON type than the schema's (`"schedulable": 0`, `"rack": 0`,
`"gpu_required": "2"`, `"tenants": {}`), naming the field. Forms post text by nature; they validate with the same
serializer under FORM_TEXT, which lets DRF read numbers and booleans from their text.
"""

from rest_framework import relations, serializers
from rest_framework.exceptions import ErrorDetail

# Serializer context of the console's forms (text fields): values are read from text as DRF reads them.
FORM_TEXT = {"form_text": True}
INCORRECT_TYPE = "incorrect_type"


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _choice_type(field: serializers.ChoiceField) -> tuple[str, object]:
    if all(_is_integer(key) for key in field.choices):
        return "an integer", _is_integer
    return "a string", lambda value: isinstance(value, str)


def _expected_type(field) -> tuple[str, object] | None:
    """What JSON type `field` takes (its name and a test), or None where any is fine (a nested serializer checks
    its own, a JSONField takes anything). The order matters: RegexField is a CharField, and so on."""
    if isinstance(field, serializers.BooleanField):
        return "a boolean", lambda value: isinstance(value, bool)
    if isinstance(field, serializers.IntegerField):
        return "an integer", _is_integer
    if isinstance(field, (serializers.FloatField, serializers.DecimalField)):
        return "a number", _is_number
    if isinstance(field, (serializers.ListField, serializers.MultipleChoiceField, relations.ManyRelatedField,
                          serializers.ListSerializer)):
        return "an array", lambda value: isinstance(value, list)
    if isinstance(field, serializers.ChoiceField):
        return _choice_type(field)
    if isinstance(field, (serializers.CharField, serializers.DateTimeField, serializers.DateField,
                          serializers.TimeField, serializers.DurationField)):
        return "a string", lambda value: isinstance(value, str)
    if isinstance(field, (serializers.DictField, serializers.Serializer)):
        return "an object", lambda value: isinstance(value, dict)
    if isinstance(field, relations.PrimaryKeyRelatedField):
        return "an integer id", _is_integer
    return None


def _type_errors(field, value):
    """The type errors of `value` for `field`, shaped as DRF shapes a field's errors (a list of messages, or by
    position / key for the items of arrays and maps), or None."""
    if value is None:
        return None  # allow_null is the field's to judge
    expected = _expected_type(field)
    if expected is not None and not expected[1](value):
        return [ErrorDetail(f"must be {expected[0]}", code=INCORRECT_TYPE)]
    child = getattr(field, "child", None) or getattr(field, "child_relation", None)
    if child is None or isinstance(child, StrictSerializer):
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value)
    errors = {key: error for key, item in items if (error := _type_errors(child, item))}
    return errors or None


def _untrimmed(field) -> None:
    """Text is taken as sent: DRF's trimming would turn `" "` into a blank the schema's `minLength: 1` allows, and
    `" node-1"` into a name its pattern refuses."""
    if isinstance(field, serializers.CharField):
        field.trim_whitespace = False
    child = getattr(field, "child", None)
    if child is not None and not isinstance(child, serializers.Serializer):
        _untrimmed(child)


class StrictSerializer(serializers.Serializer):
    """Exactly these fields, each of its JSON type and text as sent: an unknown field or a value of another type is
    a 400 naming the field."""

    # (Under FORM_TEXT the types are read from text, as DRF reads them.)

    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            _untrimmed(field)
        return fields

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
            if not self.context.get("form_text"):
                errors = {name: error for name, field in self.fields.items()
                          if not field.read_only and name in data and (error := _type_errors(field, data[name]))}
                if errors:
                    raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def flat_errors(detail, prefix: str = "") -> dict[str, list[str]]:
    """Nested serializer errors as {"gpus[3].memory_total_mb": [...]}, so the body names the exact field."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(key, int):
                name = f"{prefix}[{key}]"
            elif key == "non_field_errors" and prefix:
                name = prefix
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            flat.update(flat_errors(value, name))
        return flat
    if isinstance(detail, list) and detail and all(isinstance(item, (dict, list)) for item in detail):
        flat = {}
        for position, item in enumerate(detail):
            flat.update(flat_errors(item, f"{prefix}[{position}]"))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or UNNAMED: [str(message) for message in messages]}


# The key of errors that name no field.
UNNAMED = "detail"


def validated(serializer_class, data, **kwargs) -> dict:
    """The serializer's validated data; a ValidationError otherwise, whose nested fields the API error handler
    names one by one (`gpus[3].memory_total_mb`)."""
    payload = serializer_class(data=data, **kwargs)
    payload.is_valid(raise_exception=True)
    return payload.validated_data
