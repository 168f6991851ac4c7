"""The one validation of a task submission, shared by the API and the job form."""

from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers

from heteroflow_site.errors import NotAllowed
from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import ColumnIntegerField, CommandField, ImageField, LabelsField, NameField
from nodes.models import GPU_TYPES
from nodes.taint_input import tolerations_field
from scheduling.api.env_input import EnvField
from scheduling.framework.gpu_models import MODEL_LABEL, patterns_error
from scheduling.models import TaskType


MAX_DEADLINE_AHEAD = timedelta(days=366)


class TaskInput(StrictSerializer):
    name = NameField()
    type = serializers.ChoiceField(choices=TaskType.choices, default=TaskType.BATCH)
    image = ImageField()
    command = CommandField()
    gpu_type = serializers.ChoiceField(choices=[""] + list(GPU_TYPES), required=False, allow_blank=True, default="")
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
        """`gpu-model` must name at least one card model, in the grammar the scheduler matches (design §15.2)."""
        if MODEL_LABEL in labels:
            error = patterns_error(labels[MODEL_LABEL])
            if error:
                raise serializers.ValidationError(f"{MODEL_LABEL}: {error}")
        return labels
