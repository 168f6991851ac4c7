from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses unknown top-level fields, naming them, instead of silently dropping them (SPEC §3)."""

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
