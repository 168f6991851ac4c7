"""The API's field for a GPU type (docs/scheduling.md, Tasks and their lifecycle): task and group submissions, the
agent's card reports and quotas take any case and store it lower case (`normalised_gpu_type`, which the admin's card
actions, the admin quota form and `card_fault` use too), so everything past the entry (the scheduler above all)
compares stored types as they are."""

from rest_framework import serializers

from heteroflow_site.validation import normalised_gpu_type
from nodes.models import GPU_TYPES


class GpuTypeField(serializers.ChoiceField):
    """One of GPU_TYPES in any case, stored lower case; with `allow_blank`, "" for any type."""

    def __init__(self, **kwargs):
        choices = ["", *GPU_TYPES] if kwargs.get("allow_blank") else list(GPU_TYPES)
        kwargs.setdefault("help_text", "any case; stored lower case")
        super().__init__(choices=choices, **kwargs)

    def to_internal_value(self, data):
        return super().to_internal_value(normalised_gpu_type(data) if isinstance(data, str) else data)
