"""The one normalisation of a GPU type named in a request (docs/scheduling.md, Tasks and their lifecycle): task and
group submissions, the agent's card reports, quotas, the admin's card actions and the commands that name a card.
Stored types are lower case, so everything past the entry (the scheduler above all) compares them as they are."""

from rest_framework import serializers

from nodes.models import GPU_TYPES


def normalised_gpu_type(text: str) -> str:
    """`NVIDIA ` from an older client means `nvidia`."""
    return text.strip().lower()


class GpuTypeField(serializers.ChoiceField):
    """One of GPU_TYPES in any case, stored lower case; with `allow_blank`, "" for any type."""

    def __init__(self, **kwargs):
        choices = ["", *GPU_TYPES] if kwargs.get("allow_blank") else list(GPU_TYPES)
        kwargs.setdefault("help_text", "any case; stored lower case")
        super().__init__(choices=choices, **kwargs)

    def to_internal_value(self, data):
        return super().to_internal_value(normalised_gpu_type(data) if isinstance(data, str) else data)
