from rest_framework import exceptions, serializers


class StrictSerializer(serializers.Serializer):
    """Refuses unknown top-level fields, naming them, instead of silently dropping them."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return super().to_internal_value(data)


class StringMapField(serializers.DictField):
    """A {string: string} map such as node or task labels."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(allow_blank=True, max_length=500), **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        for key in value:
            if not key or len(key) > 200:
                raise serializers.ValidationError(f"label key {key!r} must be 1–200 characters")
        return value


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
    return {prefix or "detail": [str(message) for message in messages]}


def validated(serializer_class, data, **kwargs) -> dict:
    payload = serializer_class(data=data, **kwargs)
    if not payload.is_valid():
        raise exceptions.ValidationError(flat_errors(payload.errors))
    return payload.validated_data
