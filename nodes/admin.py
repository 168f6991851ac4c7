from django.contrib import admin

from nodes.models import GPU, CardHealthEvent, LivenessClock, Node, NodeAuditEntry, NodeChange


class GPUInline(admin.TabularInline):
    model = GPU
    extra = 0


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "schedulable", "gpu_type", "gpu_used", "gpu_total", "region", "zone", "rack",
                    "last_heartbeat_at"]
    list_filter = ["status", "schedulable", "gpu_type", "region", "zone"]
    search_fields = ["name", "internal_ip"]
    exclude = ["agent_token_hash"]
    inlines = [GPUInline]


@admin.register(GPU)
class GPUAdmin(admin.ModelAdmin):
    list_display = ["node", "index", "type", "model", "memory_used_mb", "memory_total_mb", "utilization",
                    "temperature", "numa"]
    list_filter = ["type", "model"]
    search_fields = ["node__name", "uuid"]


@admin.register(NodeAuditEntry)
class NodeAuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "node", "actor", "action"]
    list_filter = ["action"]
    search_fields = ["node__name", "actor__username"]
    readonly_fields = ["node", "actor", "action", "before", "after", "at"]


@admin.register(NodeChange)
class NodeChangeAdmin(admin.ModelAdmin):
    """Written by database triggers only: read-only here."""

    list_display = ["at", "node_id", "xid"]
    search_fields = ["node_id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the control plane writes itself: shown here, never added, changed or deleted by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(LivenessClock)
class LivenessClockAdmin(ReadOnlyAdmin):
    """The liveness loop's own clocks (design §4), written only by heartbeats and the loop."""

    list_display = ["key", "last_reachable_at", "reachable_since"]


@admin.register(CardHealthEvent)
class CardHealthEventAdmin(ReadOnlyAdmin):
    """A card's health history (design §17.3), written by heartbeats and releases only."""

    list_display = ["node", "card_type", "card_index", "kind", "health", "actor", "at"]
    list_filter = ["kind", "health"]
