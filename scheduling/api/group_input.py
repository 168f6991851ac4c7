"""The one validation of a task group submission, shared by the API and the group form (as task_input for tasks)."""

from rest_framework import serializers

from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import (
    REPLICAS_MAX,
    WORLD_SIZE_MAX,
    ColumnIntegerField,
    CommandField,
    ImageField,
    LabelsField,
    NameField,
)
from nodes.models import GPU_TYPES
from nodes.taint_input import tolerations_field
from scheduling.api.task_input import grace_field, only_for_types, timeout_field, valid_task_labels
from scheduling.models import Parallelism, TaskType

INFERENCE_ONLY = "applies to inference groups only"


class ScheduleWindowInput(StrictSerializer):
    days = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=6), required=False)
    start = serializers.RegexField(r"^\d{2}:\d{2}$")
    end = serializers.RegexField(r"^\d{2}:\d{2}$")
    timezone = serializers.CharField(max_length=64, required=False, default="UTC")
    action = serializers.ChoiceField(choices=["pause", "scale", "stop"])
    scale_to = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False)


class TaskGroupInput(StrictSerializer):
    name = NameField()
    type = serializers.ChoiceField(choices=["training", "inference"])
    world_size = serializers.IntegerField(min_value=1, max_value=WORLD_SIZE_MAX)
    gpus_per_worker = serializers.IntegerField(min_value=0, max_value=64)
    gpu_type = serializers.ChoiceField(choices=[""] + list(GPU_TYPES), required=False, allow_blank=True, default="")
    parallelism = serializers.ChoiceField(choices=Parallelism.choices, required=False, default=Parallelism.DATA)
    replicas = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, allow_null=True,
                                        default=None)
    window = ScheduleWindowInput(required=False, allow_null=True, default=None)
    image = ImageField()
    command = CommandField()
    # Absent: min(50, the tenant's max_priority) (design §16.2).
    priority = serializers.IntegerField(min_value=0, max_value=100, required=False, default=None)
    max_restarts = serializers.IntegerField(min_value=0, max_value=100, required=False, default=3)
    tolerations = tolerations_field(required=False, default=list)
    node_selector = LabelsField(required=False, default=dict)
    labels = LabelsField(required=False, default=dict, help_text="every member's labels, as a task's")
    tenant = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None)
    # Every member's (design §17.1).
    timeout_seconds = timeout_field()
    termination_grace_seconds = grace_field()

    def validate_labels(self, labels: dict[str, str]) -> dict[str, str]:
        return valid_task_labels(labels)

    @classmethod
    def request_schema(cls, schema: dict) -> dict:
        return only_for_types(schema, [TaskType.TRAINING], {"replicas": {"type": "null"}, "window": {"type": "null"}})

    def validate(self, data: dict) -> dict:
        # A training gang is `world_size` members, placed whole: no replica count, no window (a 400 the schema
        # states, `request_schema`).
        if data["type"] == TaskType.TRAINING:
            errors = {name: [INFERENCE_ONLY] for name in ("replicas", "window") if data.get(name) is not None}
            if errors:
                raise serializers.ValidationError(errors)
        return data
