"""The `env` of tasks and groups (design §17.2): the variables a submitter gives the container.

Names are `[A-Z_][A-Z0-9_]*`, at most 64 of them, values at most 4 KiB. The variables the control plane sets at bind
(the cards a container may use, a gang's rank and master address, a card share's limits) always win, so naming one
is refused rather than silently overridden. The schema states all of it, so a body it allows is never refused.
"""

import re

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from heteroflow_site.validation import STORABLE_PATTERN
from nodes.agent.runtime import DEVICE_ACCESS
from scheduling.bind.shards import (
    ENV_COMPUTE_PERCENT,
    ENV_MEMORY_LIMIT,
    ENV_MPS_MEMORY_LIMIT,
    ENV_MPS_THREAD_PERCENT,
    ENV_QOS,
)
from scheduling.groups.gang_bind import member_env

ENV_MAX = 64
ENV_VALUE_MAX_LENGTH = 4096
ENV_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]*$"
ENV_NAME_MAX_LENGTH = 255
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
CONTROL_PLANE_VARIABLES = frozenset({
    *(access.visible_devices_env for access in DEVICE_ACCESS.values()),
    *member_env(0, 1, "", ""),
    ENV_MEMORY_LIMIT, ENV_COMPUTE_PERCENT, ENV_QOS, ENV_MPS_MEMORY_LIMIT, ENV_MPS_THREAD_PERCENT,
})

_ENV_SCHEMA = {
    "type": "object",
    "maxProperties": ENV_MAX,
    "propertyNames": {"type": "string", "minLength": 1, "maxLength": ENV_NAME_MAX_LENGTH,
                      "pattern": ENV_NAME_PATTERN, "not": {"enum": sorted(CONTROL_PLANE_VARIABLES)}},
    "additionalProperties": {"type": "string", "maxLength": ENV_VALUE_MAX_LENGTH, "pattern": STORABLE_PATTERN},
}


@extend_schema_field(_ENV_SCHEMA)
class EnvField(serializers.DictField):
    """A {NAME: value} map as the module docstring says; errors name the variable (`env.NAME`)."""

    def __init__(self, **kwargs):
        child = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=ENV_VALUE_MAX_LENGTH)
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", dict)
        super().__init__(child=child, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, dict) and len(data) > ENV_MAX:
            raise serializers.ValidationError(f"at most {ENV_MAX} variables")
        value = super().to_internal_value(data)
        errors = {name: [problem] for name, text in value.items() if (problem := env_problem(name, text))}
        if errors:
            raise serializers.ValidationError(errors)
        return value


def env_problem(name: str, value: str) -> str:
    """What is wrong with one variable ("" when nothing is)."""
    if not _NAME.fullmatch(name) or len(name) > ENV_NAME_MAX_LENGTH:
        return f"variable names are 1–{ENV_NAME_MAX_LENGTH} characters of [A-Z_][A-Z0-9_]*"
    if name in CONTROL_PLANE_VARIABLES:
        return f"{name} is set by the control plane and cannot be given"
    if "\x00" in value:
        return "NUL characters are not allowed"
    return ""
