from django.contrib import admin

from scheduling.models import (
    AttemptCodeCount,
    ClusterSample,
    CycleRecord,
    GroupEvent,
    GroupMetricSample,
    GroupRevision,
    SchedulingAttempt,
    Task,
    TaskEvent,
    TaskGroup,
    TaskLog,
    TaskLogChunk,
    TaskTemplate,
    UsageRecord,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """The control plane's own records: shown to superusers, written by the scheduler only."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class TaskEventInline(admin.TabularInline):
    model = TaskEvent
    extra = 0
    readonly_fields = ["from_status", "to_status", "reason", "at"]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "tenant", "type", "status", "priority", "gpu_type", "gpu_required", "gpu_memory_mb",
                    "node", "created_at"]
    list_filter = ["status", "type", "gpu_type", "tenant", "preemptible"]
    search_fields = ["name"]
    # Status moves only through the state machine's CAS (design §2), never by editing a form.
    readonly_fields = ["status", "node", "gpus", "port", "shard", "preempt_count"]
    inlines = [TaskEventInline]


@admin.register(TaskGroup)
class TaskGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "type", "world_size", "gpus_per_worker", "parallelism", "replicas", "status"]
    list_filter = ["type", "parallelism", "status"]


@admin.register(SchedulingAttempt)
class SchedulingAttemptAdmin(ReadOnlyAdmin):
    list_display = ["task", "code", "message", "at"]
    list_filter = ["code"]


@admin.register(AttemptCodeCount)
class AttemptCodeCountAdmin(ReadOnlyAdmin):
    list_display = ["code", "count"]


@admin.register(CycleRecord)
class CycleRecordAdmin(ReadOnlyAdmin):
    list_display = ["started_at", "considered", "bound", "failed", "preempting", "duration_ms"]


@admin.register(ClusterSample)
class ClusterSampleAdmin(ReadOnlyAdmin):
    list_display = ["at", "pending", "cycle_ms"]



@admin.register(TaskEvent)
class TaskEventAdmin(admin.ModelAdmin):
    list_display = ["at", "task", "from_status", "to_status", "reason"]
    list_filter = ["to_status"]
    search_fields = ["task__name", "reason"]
    # The timeline is written by the state machine only.
    readonly_fields = ["task", "from_status", "to_status", "reason", "at"]


@admin.register(TaskLog)
class TaskLogAdmin(admin.ModelAdmin):
    list_display = ["task", "dropped_bytes", "end_offset", "updated_at"]
    search_fields = ["task__name"]
    # Written by the agents' log batches only; the bytes are in chunks (the task page and the API show them as text).
    readonly_fields = ["task", "dropped_bytes", "end_offset", "updated_at"]


@admin.register(TaskLogChunk)
class TaskLogChunkAdmin(ReadOnlyAdmin):
    list_display = ["task", "start_offset"]
    # The bytes stay out of the list: a chunk is up to a batch of a task's output.
    exclude = ["content"]


@admin.register(GroupRevision)
class GroupRevisionAdmin(ReadOnlyAdmin):
    list_display = ["group", "number", "state", "image", "created_at", "finished_at"]
    list_filter = ["state"]


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = ["day", "tenant", "gpu_type", "task_type", "card_seconds"]
    list_filter = ["gpu_type", "task_type"]
    date_hierarchy = "day"


@admin.register(TaskTemplate)
class TaskTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "created_at"]
    search_fields = ["name"]


@admin.register(GroupEvent)
class GroupEventAdmin(ReadOnlyAdmin):
    list_display = ["group", "kind", "message", "at"]
    list_filter = ["kind"]


@admin.register(GroupMetricSample)
class GroupMetricSampleAdmin(ReadOnlyAdmin):
    list_display = ["group", "at", "desired", "ready", "value", "proposed"]
