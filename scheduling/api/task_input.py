"""The one validation of a task submission, shared by the API and the job form."""

from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers

from heteroflow_site.errors import NotAllowed
from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import ColumnIntegerField, CommandField, ImageField, LabelsField, NameField
from nodes.gpu_type_input import GpuTypeField
from nodes.taint_input import tolerations_field
from scheduling.api.env_input import EnvField
from scheduling.framework.gpu_models import MODEL_LABEL, patterns_error
from scheduling.models import (
    DEFAULT_GRACE_SECONDS,
    GRACE_MAX_SECONDS,
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    TaskType,
)

MAX_DEADLINE_AHEAD = timedelta(days=366)
# A task without any of these runs nothing and holds nothing: a mistake, not work. Each with the schema bound
# that makes it count.
ASKING_FOR_SOMETHING = {
    "image": {"minLength": 1}, "command": {"minLength": 1}, "gpu_required": {"minimum": 1},
    "gpu_memory_mb": {"minimum": 1}, "cpu_cores": {"exclusiveMinimum": 0}, "memory_mb": {"minimum": 1},
}
NOTHING_ASKED = "a task must ask for something: an image, a command, GPUs, GPU memory, CPU or memory"

TRAINING_NOT_PREEMPTIBLE = "training tasks cannot be preemptible"


def timeout_field() -> serializers.IntegerField:
    """design §17.1: left out, the type's default (`default_task_timeout` for batch and training, none for
    inference); null, none at all."""
    return serializers.IntegerField(
        min_value=TIMEOUT_MIN_SECONDS, max_value=TIMEOUT_MAX_SECONDS, required=False, allow_null=True,
        help_text="seconds it may run before it is stopped and fails with `Timeout`; null: until stopped; left out: "
                  "the default of its type (batch and training: `default_task_timeout`, inference: none)")


def grace_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=0, max_value=GRACE_MAX_SECONDS, required=False, default=DEFAULT_GRACE_SECONDS,
        help_text="seconds between the stop signal (SIGTERM) and the kill, on every stop: the user's, a preemption, "
                  "the timeout, a drain")


def only_for_types(schema: dict, types: list[str], rules: dict[str, dict]) -> dict:
    """`schema` with an OpenAPI 3.1 `if`/`then`: when `type` is one of `types`, each named property must match its
    rule — the schema states a rule across fields that validation enforces, so a body it allows is never refused
    for it (design §17.1)."""
    condition = {"if": {"properties": {"type": {"enum": types}}, "required": ["type"]},
                 "then": {"properties": rules}}
    return {**schema, "allOf": [*schema.get("allOf", []), condition]}


class TaskInput(StrictSerializer):
    name = NameField()
    type = serializers.ChoiceField(choices=TaskType.choices, default=TaskType.BATCH)
    image = ImageField()
    command = CommandField()
    gpu_type = GpuTypeField(required=False, allow_blank=True, default="")
    gpu_required = serializers.IntegerField(min_value=0, max_value=1024, required=False, default=0)
    gpu_memory_mb = serializers.IntegerField(min_value=0, max_value=10_000_000, required=False, default=0)
    gpu_compute_percent = serializers.IntegerField(min_value=1, max_value=100, required=False, allow_null=True,
                                                   default=None)
    cpu_cores = serializers.FloatField(min_value=0, max_value=4096, required=False, default=0)
    memory_mb = serializers.IntegerField(min_value=0, max_value=100_000_000, required=False, default=0)
    # Absent: min(50, the tenant's max_priority) (design §16.2).
    priority = serializers.IntegerField(min_value=0, max_value=100, required=False, default=None)
    preemptible = serializers.BooleanField(required=False, default=False)
    labels = LabelsField(required=False, default=dict)
    tolerations = tolerations_field(required=False, default=list)
    node_selector = LabelsField(required=False, default=dict)
    env = EnvField()
    # Optional; only the weighted queue order reads it (design §16.3).
    deadline = serializers.DateTimeField(required=False, allow_null=True, default=None,
                                         help_text="ISO 8601; in the future, at most a year ahead")
    group = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None)
    tenant = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None)
    timeout_seconds = timeout_field()
    termination_grace_seconds = grace_field()

    @classmethod
    def request_schema(cls, schema: dict) -> dict:
        """The rules across fields that validation enforces, stated by the schema so that a body it allows is never
        refused for them: a task asks for something to run or something to hold (`anyOf`), and a training task is
        not preemptible (the seed's rule, `if`/`then`)."""
        asks = [{"required": [name], "properties": {name: bound}} for name, bound in ASKING_FOR_SOMETHING.items()]
        return only_for_types({**schema, "anyOf": asks}, [TaskType.TRAINING], {"preemptible": {"const": False}})

    def validate(self, data: dict) -> dict:
        if not any(data.get(name) for name in ASKING_FOR_SOMETHING):
            raise serializers.ValidationError({"image": NOTHING_ASKED})
        if data.get("type") == TaskType.TRAINING and data.get("preemptible"):
            raise serializers.ValidationError({"preemptible": [TRAINING_NOT_PREEMPTIBLE]})
        return data

    def validate_deadline(self, deadline):
        # A rule of the moment, which no schema can state: a well-formed deadline outside it is a 403, not a 400.
        if deadline is None:
            return None
        now = timezone.now()
        if deadline <= now:
            raise NotAllowed("must be in the future", field="deadline")
        if deadline > now + MAX_DEADLINE_AHEAD:
            raise NotAllowed(f"must be at most {MAX_DEADLINE_AHEAD.days} days ahead", field="deadline")
        return deadline

    def validate_labels(self, labels: dict[str, str]) -> dict[str, str]:
        return valid_task_labels(labels)


def valid_task_labels(labels: dict[str, str]) -> dict[str, str]:
    """A task's (or a group's members') labels: `gpu-model` must name at least one card model, in the grammar the
    scheduler matches (design §15.2)."""
    if MODEL_LABEL in labels:
        error = patterns_error(labels[MODEL_LABEL])
        if error:
            raise serializers.ValidationError(f"{MODEL_LABEL}: {error}")
    return labels
