from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from nodes.models import DRAIN_GRACE_MAX_SECONDS, GPU_TYPE_CHOICES
from scheduling.framework.snapshot import is_fractional

# A task's reason and its timeline rows' (lifecycle.fitting_reason shortens longer ones in one place).
REASON_MAX_LENGTH = 300
# design §17.1: a task or group may run for 60 s to 30 days (or without a timeout), and is given 0–600 s between
# the stop signal and the kill (10: the seed's `docker stop -t 10`).
TIMEOUT_MIN_SECONDS = 60
TIMEOUT_MAX_SECONDS = 30 * 24 * 3600
GRACE_MAX_SECONDS = 600
DEFAULT_GRACE_SECONDS = 10
# The grace a task's container gets when stopped now: the stop's own (a drain's), else the task's (an expression, for
# the agent's stop items and the preemption watchdog alike).
GRACE_OF_STOP = Coalesce(F("stop_grace_seconds"), F("termination_grace_seconds"))


class TaskStatus(models.TextChoices):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PREEMPTING = "preempting"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"


class TaskType(models.TextChoices):
    BATCH = "batch"
    TRAINING = "training"
    INFERENCE = "inference"


# The states of a task that holds its node's resources (`scheduling.lifecycle.ACTIVE_STATES`, where the rest of
# the code reads them), and the types preemption never evicts (design §9): the conditions of the partial indexes.
_HOLDING_NODE = Q(node__isnull=False, status__in=[TaskStatus.SCHEDULED, TaskStatus.RUNNING, TaskStatus.PREEMPTING,
                                                  TaskStatus.STOPPING])
_EVICTABLE = Q(status=TaskStatus.PREEMPTING) | Q(preemptible=True) & ~Q(type__in=[TaskType.TRAINING,
                                                                                   TaskType.INFERENCE])


class Parallelism(models.TextChoices):
    TENSOR = "tensor"
    DATA = "data"
    GREEDY = "greedy"
    COSCHEDULE = "coschedule"
    PIPELINE = "pipeline"


class TaskGroup(models.Model):
    # Derived from the members by `scheduling.groups.status` whenever one changes (design §15.5); never set by hand.
    class Status(models.TextChoices):
        PENDING = "pending"
        SCHEDULED = "scheduled"
        RUNNING = "running"
        RESTARTING = "restarting"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        STOPPED = "stopped"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="task_groups")
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=16, choices=[(TaskType.TRAINING, "training"), (TaskType.INFERENCE, "inference")])
    world_size = models.PositiveIntegerField(default=1)
    gpus_per_worker = models.PositiveIntegerField(default=1)
    gpu_type = models.CharField(max_length=32, blank=True, default="", choices=GPU_TYPE_CHOICES)
    parallelism = models.CharField(max_length=16, choices=Parallelism.choices, default=Parallelism.DATA)
    image = models.CharField(max_length=500, blank=True, default="")
    command = models.TextField(blank=True, default="")
    replicas = models.PositiveIntegerField(null=True, blank=True)
    # {days: [0..6], start: "HH:MM", end: "HH:MM", timezone, action: pause|scale|stop, scale_to?}
    window = models.JSONField(null=True, blank=True)
    # Replica count from before a window's action, restored when the window opens again.
    replicas_before_window = models.PositiveIntegerField(null=True, blank=True)
    window_applied = models.CharField(max_length=16, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # A training gang that loses a member is placed again whole, at most this many times (design §15.5).
    max_restarts = models.PositiveIntegerField(default=3)
    # How many times it was; the members of the current run carry this number as their `group_run`.
    restarts = models.PositiveIntegerField(default=0)
    master_addr = models.CharField(max_length=64, blank=True, default="")
    backend = models.CharField(max_length=16, blank=True, default="")
    # design §16.3: every member's tolerations and node selector.
    tolerations = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    # Every member's labels, as a task's (members created later, rebuilt replicas and restarts, get them too).
    labels = models.JSONField(default=dict, blank=True)
    # design §17.1, passed to every member: None runs until stopped; the grace between stop signal and kill.
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    termination_grace_seconds = models.PositiveIntegerField(default=DEFAULT_GRACE_SECONDS)
    # The latest gang attempt: {code, message, member, reason}.
    diagnostics = models.JSONField(default=dict, blank=True)
    # The variables every member's container gets (design §17.2; `scheduling.api.env_input` says which are refused).
    env = models.JSONField(default=dict, blank=True)
    # Set when a user stopped the group (design §17.2): nothing is rebuilt, scaled or rolled out after it.
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The revision new replicas are made of (`GroupRevision.number`); a rollout moves it on, a rollback back.
    revision = models.PositiveIntegerField(default=1)
    # How a rollout replaces replicas (design §17.2): at most `max_surge` above `replicas`, never more than
    # `max_unavailable` ready ones below it; a revision not ready within `ready_timeout_seconds` is rolled back.
    max_surge = models.PositiveIntegerField(default=1)
    max_unavailable = models.PositiveIntegerField(default=0)
    ready_timeout_seconds = models.PositiveIntegerField(default=600)
    # {path, port, period_seconds, failure_threshold}: how the agent probes each replica; null: running is ready.
    readiness = models.JSONField(null=True, blank=True)
    # The model artifact the group serves (design §17.2, model distribution): nodes already holding it score higher.
    model = models.CharField(max_length=200, blank=True, default="")
    # The disruption budget (design §17.2): drain, defrag, reclaim and a rolling update never leave fewer ready
    # replicas than this; null: no budget.
    min_available = models.PositiveIntegerField(null=True, blank=True)
    # {across: node|rack|zone, max_skew, hard} (design §17.2): replicas placed evenly over that node label.
    spread = models.JSONField(null=True, blank=True)
    # {min, max, metric, target, scale_down_delay_seconds} (design §17.2): the autoscaler sets `replicas`.
    autoscale = models.JSONField(null=True, blank=True)
    # Members of each replica of an inference group, one per node, placed whole as a gang (design §17.1).
    nodes_per_replica = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(world_size__gte=1), name="group_world_size_positive"),
            models.CheckConstraint(condition=Q(nodes_per_replica__gte=1), name="group_nodes_per_replica_positive"),
            models.CheckConstraint(
                condition=Q(timeout_seconds__isnull=True)
                | Q(timeout_seconds__gte=TIMEOUT_MIN_SECONDS, timeout_seconds__lte=TIMEOUT_MAX_SECONDS),
                name="group_timeout_60s_30d",
            ),
            models.CheckConstraint(condition=Q(termination_grace_seconds__lte=GRACE_MAX_SECONDS),
                                   name="group_grace_at_most_600s"),
        ]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=16, choices=TaskType.choices, default=TaskType.BATCH)
    image = models.CharField(max_length=500, blank=True, default="")
    command = models.TextField(blank=True, default="")
    gpu_type = models.CharField(max_length=32, blank=True, default="", choices=GPU_TYPE_CHOICES)
    gpu_required = models.IntegerField(default=0)
    gpu_memory_mb = models.IntegerField(default=0)
    gpu_compute_percent = models.IntegerField(null=True, blank=True)
    cpu_cores = models.FloatField(default=0)
    memory_mb = models.IntegerField(default=0)
    priority = models.IntegerField(default=50)
    preemptible = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    # design §16.3 (`nodes.taints`): the node taints it tolerates, and the node labels it needs.
    tolerations = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    group = models.ForeignKey(TaskGroup, null=True, blank=True, on_delete=models.CASCADE, related_name="members")
    rank = models.IntegerField(null=True, blank=True)
    # The replica a member of a multi-node inference replica belongs to (design §17.1; its `rank` counts within
    # it, 0 its master); None for every other task: a single-node replica's number is its `rank`. Never reused in a
    # group, so a replica's members are found by it for as long as they are kept.
    replica = models.PositiveIntegerField(null=True, blank=True)
    # Which run of its gang the task belongs to (the group's `restarts` when it was created).
    group_run = models.PositiveIntegerField(default=0)
    # No index of its own: `task_queue_order` leads with status, and every extra index slows each state change.
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.PENDING)
    node = models.ForeignKey("nodes.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks")
    gpus = models.JSONField(default=list, blank=True)
    # The type of the cards in `gpus` (and of the shard's card): indexes are numbered per vendor on a mixed node
    # (design §15.3), and a task without `gpu_type` may get cards of any one type.
    card_type = models.CharField(max_length=32, blank=True, default="")
    port = models.IntegerField(null=True, blank=True)
    # The fractional-GPU shard made at bind: {card, memory_limit_mb, compute_percent, qos, env}.
    shard = models.JSONField(null=True, blank=True)
    # The container's environment: `submitted_env` (the submitter's, design §17.2) with the variables the control
    # plane sets at bind on top; back in the queue it is the submitter's again.
    env = models.JSONField(default=dict, blank=True)
    submitted_env = models.JSONField(default=dict, blank=True)
    # The model artifact a replica serves (its group's `model`): the scheduler prefers nodes that hold it.
    model = models.CharField(max_length=200, blank=True, default="")
    # Which revision of its group the replica runs (`TaskGroup.revision` when it was created).
    revision = models.PositiveIntegerField(default=1)
    # The node agent's latest readiness probe (design §17.2), and when the replica last became ready.
    ready = models.BooleanField(default=False)
    ready_at = models.DateTimeField(null=True, blank=True)
    # The autoscaler's metric of the replica as its node agent last reported it, and when (design §17.2).
    metric_value = models.FloatField(null=True, blank=True)
    metric_at = models.DateTimeField(null=True, blank=True)
    preempt_count = models.PositiveIntegerField(default=0)
    # Admitted beyond its tenant's nominal quota by borrowing the cohort's (design §16.2): a reclaim may evict it.
    borrowed = models.BooleanField(default=False)
    # The scheduling queue (design §15.1, `scheduling.queue`): a pending task whose attempt failed is parked until
    # `parked_until` (backoff doubling with `queue_backoff`, the failed attempts in a row) or until an event that
    # could make it fit clears it. `nominated_node`: where its preemption is freeing cards for it.
    queue_backoff = models.PositiveSmallIntegerField(default=0)
    parked_until = models.DateTimeField(null=True, blank=True)
    nominated_node = models.ForeignKey("nodes.Node", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="nominated_tasks")
    # When it became its GPU type's reserved job (design §16.3, `scheduling.queue.reservation`): its
    # `nominated_node` then holds freed cards for it until it binds or leaves the queue.
    reserved_at = models.DateTimeField(null=True, blank=True)
    # When the submitter needs it done by (optional): the SLA term of the weighted queue order (design §16.3).
    deadline = models.DateTimeField(null=True, blank=True)
    # design §17.1: stopped (failing with `Timeout`) once running this long, None: runs until stopped — set at
    # creation, `default_task_timeout` for batch and training unless the submitter said otherwise. Every stop
    # (the user's, a preemption, the timeout, a drain) gives the container this long between signal and kill.
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    termination_grace_seconds = models.PositiveIntegerField(default=DEFAULT_GRACE_SECONDS)
    # The grace of the stop under way when it is not the task's own (a drain that set one, design §17.3): the task's
    # `termination_grace_seconds` stays its own for its next placement. Cleared when the task is pending again.
    stop_grace_seconds = models.PositiveIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # How far this task's current or last placement is already in the usage records (design §17.4): recording
    # moves it forward by compare-and-swap, so a replayed transition or a second ticker run counts nothing again.
    usage_counted_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-priority", "created_at", "id"], name="task_queue_order"),
            models.Index(fields=["parked_until"], name="task_parked", condition=Q(parked_until__isnull=False)),
            # The reads of a node's active tasks and of the nodes where preemption may act stay index reads of the
            # few rows they return whatever the planner's statistics say (a plan estimated at one row became a
            # scan of every active task per active task once the statistics were taken with none active).
            models.Index(fields=["node"], name="task_holding_node", condition=_HOLDING_NODE),
            models.Index(fields=["node"], name="task_evictable_on_node", condition=_HOLDING_NODE & _EVICTABLE),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(priority__gte=0, priority__lte=100), name="task_priority_0_100"),
            models.CheckConstraint(condition=Q(gpu_required__gte=0), name="task_gpu_required_non_negative"),
            models.CheckConstraint(condition=Q(gpu_memory_mb__gte=0), name="task_gpu_memory_non_negative"),
            models.CheckConstraint(condition=Q(cpu_cores__gte=0), name="task_cpu_non_negative"),
            models.CheckConstraint(condition=Q(memory_mb__gte=0), name="task_memory_non_negative"),
            models.CheckConstraint(
                condition=Q(gpu_compute_percent__isnull=True)
                | Q(gpu_compute_percent__gte=1, gpu_compute_percent__lte=100),
                name="task_compute_percent_1_100",
            ),
            models.CheckConstraint(
                condition=~Q(type=TaskType.TRAINING, preemptible=True), name="task_training_not_preemptible"
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__isnull=True)
                | Q(timeout_seconds__gte=TIMEOUT_MIN_SECONDS, timeout_seconds__lte=TIMEOUT_MAX_SECONDS),
                name="task_timeout_60s_30d",
            ),
            models.CheckConstraint(condition=Q(termination_grace_seconds__lte=GRACE_MAX_SECONDS),
                                   name="task_grace_at_most_600s"),
            models.CheckConstraint(condition=Q(stop_grace_seconds__lte=DRAIN_GRACE_MAX_SECONDS),
                                   name="task_stop_grace_at_most_a_day"),
        ]


    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def is_fractional(self) -> bool:
        return is_fractional(self.gpu_required, self.gpu_memory_mb)


class GroupRevision(models.Model):
    """One revision of an inference group's image, command and env, and how its rollout ended (design §17.2)."""

    class State(models.TextChoices):
        ROLLING_OUT = "rolling_out"
        ROLLING_BACK = "rolling_back"
        COMPLETE = "complete"
        ROLLED_BACK = "rolled_back"
        # The first revision, and one that a later rollout replaced.
        SUPERSEDED = "superseded"

    group = models.ForeignKey(TaskGroup, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    image = models.CharField(max_length=500, blank=True, default="")
    command = models.TextField(blank=True, default="")
    env = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.COMPLETE)
    reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["group", "number"]
        constraints = [
            models.UniqueConstraint(fields=["group", "number"], name="group_revision_number_unique"),
            # One rollout at a time per group (design §17.2): the database refuses a second one.
            models.UniqueConstraint(fields=["group"], condition=Q(state__in=["rolling_out", "rolling_back"]),
                                    name="group_one_rollout_at_a_time"),
        ]


# A revision in one of these is the group's rollout in progress.
ROLLOUT_STATES = (GroupRevision.State.ROLLING_OUT, GroupRevision.State.ROLLING_BACK)


class TaskEvent(models.Model):
    """One row per won transition: the task's lifecycle timeline."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, blank=True, default="")
    to_status = models.CharField(max_length=16)
    reason = models.CharField(max_length=REASON_MAX_LENGTH, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


class GroupEvent(models.Model):
    """The group's own timeline (design §17.2): what held or changed it as a whole, with its figures: an autoscaler
    decision, a disruption budget holding a drain or a rollout, a replica the tenant's quota refused, a multi-node
    replica that lost a member and is rebuilt whole."""

    class Kind(models.TextChoices):
        AUTOSCALE = "autoscale"
        BUDGET_HELD = "BudgetHeld"
        REFUSED = "refused"
        REBUILT = "rebuilt"

    group = models.ForeignKey(TaskGroup, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    message = models.CharField(max_length=REASON_MAX_LENGTH)
    figures = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["at", "id"]


class GroupMetricSample(models.Model):
    """One autoscaler tick of a group: replicas desired and ready, the metric summed over its ready replicas and the
    count that sum asked for (`proposed`; a scale-down takes the highest of the delay's); the group page draws the
    last hour of them."""

    group = models.ForeignKey(TaskGroup, on_delete=models.CASCADE, related_name="metric_samples")
    at = models.DateTimeField(db_index=True)
    desired = models.PositiveIntegerField()
    ready = models.PositiveIntegerField()
    value = models.FloatField()
    proposed = models.PositiveIntegerField()

    class Meta:
        ordering = ["at", "id"]


class SchedulingAttempt(models.Model):
    """The latest scheduling attempt of a task (design §12), successful or not."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="attempt")
    code = models.CharField(max_length=40, blank=True, default="")
    message = models.TextField(blank=True, default="")
    # {"filtered": {reason: [node names]}, "plugins": [scorer names], "scored": [[node, total, *scores]]}: a cycle
    # writes one per task, so filtered nodes are stored as names grouped by reason, not as a dict each.
    nodes = models.JSONField(default=dict, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now=True)

    def node_entries(self) -> list[dict]:
        """The nodes as the API shows them (design §14): `[{node, reason | null, scores: {plugin: score}, total}]`,
        the filtered nodes by reason, then the scored nodes best first."""
        plugins = self.nodes.get("plugins", [])
        entries = [{"node": name, "reason": reason, "scores": {}, "total": None}
                   for reason, names in self.nodes.get("filtered", {}).items() for name in names]
        entries.extend({"node": node, "reason": None, "scores": dict(zip(plugins, scores)), "total": total}
                       for node, total, *scores in self.nodes.get("scored", []))
        return entries


class AttemptCodeCount(models.Model):
    """How many attempts ended with each code, for the cluster view."""

    code = models.CharField(max_length=40, unique=True)
    count = models.BigIntegerField(default=0)


class CycleRecord(models.Model):
    started_at = models.DateTimeField(db_index=True)
    considered = models.PositiveIntegerField(default=0)
    bound = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    preempting = models.PositiveIntegerField(default=0)
    duration_ms = models.FloatField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]


class PluginConfig(models.Model):
    """The stored plugin set: one row per plugin the admin changed; a plugin without a row runs with its defaults.

    The scheduler reads it (scheduling.selectors.current_plugin_set); plugins_admin writes it and keeps its audit.
    The table keeps the name it had when plugins_admin owned the model.
    """

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    weight = models.PositiveIntegerField(default=1)
    extra = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "plugins_admin_pluginconfig"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TaskLog(models.Model):
    """The kept tail of a task's output as its node agent shipped it (design §16.4): where it ends and how much of
    its front is no longer kept; the bytes are in `TaskLogChunk`s, one per batch, so an append writes its batch and
    not the whole kept tail again (`scheduling.services.task_logs`). Readers decode with replacement: a batch may
    end inside a UTF-8 character."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, primary_key=True, related_name="log")
    # How many bytes of the task's output were dropped from the front: the output from `dropped_bytes` to
    # `end_offset` is kept, and a follower passes the `end_offset` it read back as `offset` to read only what came
    # after.
    dropped_bytes = models.BigIntegerField(default=0)
    end_offset = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    @property
    def kept_bytes(self) -> int:
        return self.end_offset - self.dropped_bytes


class TaskLogChunk(models.Model):
    """One shipped batch of a task's output, from byte `start_offset` of the whole output. Chunks wholly before
    the log's `dropped_bytes` are deleted; the first kept one may begin before it (readers start at it)."""

    id = models.BigAutoField(primary_key=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="log_chunks", db_index=False)
    start_offset = models.BigIntegerField()
    content = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["task", "start_offset"], name="task_log_chunk_order")]


class UsageRecord(models.Model):
    """Card-seconds a tenant used, per UTC day, GPU type and task type (design §17.4): written when a placement
    ends and when a day turns under a running one (`scheduling.usage.records`). It holds no task id, so it outlives
    the tasks retention deletes."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="usage_records")
    day = models.DateField()
    gpu_type = models.CharField(max_length=32, blank=True, default="")
    task_type = models.CharField(max_length=16, choices=TaskType.choices)
    card_seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["day", "tenant_id", "gpu_type", "task_type"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "day", "gpu_type", "task_type"], name="usage_record_key"),
            models.CheckConstraint(condition=Q(card_seconds__gte=0), name="usage_card_seconds_non_negative"),
        ]
        indexes = [models.Index(fields=["day"], name="usage_record_day")]


class TaskTemplate(models.Model):
    """A tenant's named submission to start from (the form's "start from", `hf submit --template NAME`): the
    fields of a task submission as `TaskInput` validated them, the name optional."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="task_templates")
    name = models.CharField(max_length=100)
    fields = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="task_template_name_per_tenant")]

    def __str__(self) -> str:
        return self.name


class ClusterSample(models.Model):
    """One point of the dashboard's history (`scheduling.history`): cards held and present per GPU type, tasks
    pending and the mean cycle duration since the previous point. Kept for HISTORY_KEEP only."""

    at = models.DateTimeField(db_index=True)
    gpu_used = models.JSONField(default=dict)
    gpu_total = models.JSONField(default=dict)
    pending = models.PositiveIntegerField(default=0)
    cycle_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
