from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses unknown top-level fields, naming them, instead of silently dropping them."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
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
