from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

GPU_TYPES = ("nvidia", "ascend", "musa", "hygon", "metax", "enflame", "iluvatar", "biren", "cambricon", "kunlun")
GPU_TYPE_CHOICES = [(gpu_type, gpu_type) for gpu_type in GPU_TYPES]
# The longest grace a drain may give each task (design §17.3): a day; longer stops are no drain but an outage.
DRAIN_GRACE_MAX_SECONDS = 86400


class CardHealth(models.TextChoices):
    """A card's health as its agent last read it from the vendor's tool (design §17.3)."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"


class DrainState(models.TextChoices):
    """design §17.3: `draining` from the request until no task holds the node, then `drained` until uncordoned."""

    NONE = ""
    DRAINING = "draining"
    DRAINED = "drained"


class Node(models.Model):
    class Status(models.TextChoices):
        ONLINE = "online"
        BUSY = "busy"
        OFFLINE = "offline"

    name = models.CharField(max_length=200, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OFFLINE, db_index=True)
    schedulable = models.BooleanField(default=True)
    dedicated_tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.SET_NULL, related_name="dedicated_nodes"
    )
    region = models.CharField(max_length=100, blank=True, default="")
    zone = models.CharField(max_length=100, blank=True, default="")
    rack = models.CharField(max_length=100, blank=True, default="")
    labels = models.JSONField(default=dict, blank=True)
    # [{key, value, effect}] (design §16.3, `nodes.taints`): which tasks may not (or would rather not) land here.
    taints = models.JSONField(default=list, blank=True)
    # Interface notation, address and prefix length: "10.0.3.7/24".
    internal_ip = models.CharField(max_length=64, blank=True, default="")
    public_ip = models.GenericIPAddressField(null=True, blank=True)
    cpu_cores = models.PositiveIntegerField(default=0)
    memory_gb = models.PositiveIntegerField(default=0)
    cpu_percent = models.FloatField(default=0)
    memory_used_mb = models.PositiveIntegerField(default=0)
    gpu_total = models.PositiveIntegerField(default=0)
    gpu_used = models.IntegerField(default=0)
    gpu_type = models.CharField(max_length=32, blank=True, default="", choices=GPU_TYPE_CHOICES)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # sha256 of the node agent's token; the token itself is shown once, at registration.
    agent_token_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # design §17.3: a drain in progress or done survives restarts here; the drain ticker carries it on.
    drain_state = models.CharField(max_length=16, choices=DrainState.choices, blank=True, default="", db_index=True)
    # Seconds each task gets to stop; None: the task's own grace.
    drain_grace_seconds = models.PositiveIntegerField(null=True, blank=True)
    drain_started_at = models.DateTimeField(null=True, blank=True)
    drain_tasks_at_start = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_used__gte=0), name="node_gpu_used_non_negative"),
            models.CheckConstraint(condition=Q(cpu_percent__gte=0), name="node_cpu_percent_non_negative"),
        ]

    def __str__(self) -> str:
        return self.name


class GPU(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveIntegerField()
    uuid = models.CharField(max_length=128, blank=True, default="")
    type = models.CharField(max_length=32, choices=GPU_TYPE_CHOICES)
    model = models.CharField(max_length=100, blank=True, default="")
    memory_total_mb = models.PositiveIntegerField(default=0)
    memory_used_mb = models.PositiveIntegerField(default=0)
    utilization = models.FloatField(default=0)
    temperature = models.FloatField(default=0)
    numa = models.IntegerField(null=True, blank=True)
    health = models.CharField(max_length=16, choices=CardHealth.choices, default=CardHealth.OK)
    # The newest error the agent reported ({code, message, at}); kept while the card reports healthy again.
    last_error = models.JSONField(null=True, blank=True)
    health_changed_at = models.DateTimeField(null=True, blank=True)
    # Since when the card has reported `ok` without a break (HETEROFLOW_CARD_AUTO_RELEASE counts from it).
    healthy_since = models.DateTimeField(null=True, blank=True)
    # Set when the card reported `failed`; it takes no placement until an admin (or the auto-release) clears it.
    quarantined_at = models.DateTimeField(null=True, blank=True, db_index=True)
    quarantine_reason = models.CharField(max_length=500, blank=True, default="")

    @property
    def quarantined(self) -> bool:
        return self.quarantined_at is not None

    class Meta:
        # Each vendor numbers its cards from 0, so on a mixed node a card is known by its type and index (design §15.3).
        ordering = ["node_id", "type", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "type", "index"], name="gpu_unique_type_index_per_node")]
        verbose_name = "GPU"

    def __str__(self) -> str:
        return f"{self.node.name}#{self.type}{self.index}"


class CardHealthEvent(models.Model):
    """A card's health history (design §17.3): each change of its reported health, each quarantine and release."""

    class Kind(models.TextChoices):
        REPORTED = "reported"
        QUARANTINED = "quarantined"
        RELEASED = "released"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="card_health_events")
    card_type = models.CharField(max_length=32, choices=GPU_TYPE_CHOICES)
    card_index = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    health = models.CharField(max_length=16, choices=CardHealth.choices)
    errors = models.JSONField(default=list, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["node", "card_type", "card_index", "-at"], name="card_health_history")]

    def __str__(self) -> str:
        return f"{self.node_id}#{self.card_type}{self.card_index} {self.kind} {self.health}"


class NodeAuditEntry(models.Model):
    """Who changed a node's admin settings (topology, labels, cordon, dedication), when, and from what to what."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="audit_entries")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "node audit entries"

    def __str__(self) -> str:
        return f"{self.action} {self.node.name} at {self.at:%Y-%m-%d %H:%M:%S}"


class NodeChange(models.Model):
    """One node whose row, cards, placements or labels a transaction changed: written by database triggers in that
    same transaction (migrations `nodes.0003`, `scheduling.0005`), so no write path can forget it. The scheduler
    cache asks which nodes changed since its last look (`nodes.selectors.nodes_changed_since`).

    `xid` is the writing transaction's id, not a sequence: transactions commit out of order, and a reader that
    remembers its snapshot's xmin finds every change committed after its last look, even one whose transaction
    began before it. No foreign key: a deleted node's change is recorded too.
    """

    node_id = models.BigIntegerField()
    xid = models.BigIntegerField(db_index=True)
    at = models.DateTimeField(db_default=Now(), db_index=True)

    def __str__(self) -> str:
        return f"node {self.node_id} changed by transaction {self.xid}"


class LivenessClock(models.Model):
    """When the liveness loop last reached the database, and since when it has without a gap (issue 13 item 7).

    While the database is unreachable no heartbeat can land, so silence measured by wall time would send every node
    offline the moment it returns; silence counts only from `reachable_since`.
    """

    key = models.CharField(max_length=32, unique=True, default="liveness")
    last_reachable_at = models.DateTimeField()
    reachable_since = models.DateTimeField()
