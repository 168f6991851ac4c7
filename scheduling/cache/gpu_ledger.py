"""THE recount of a node's `gpu_used` ledger (design §7), for the heartbeat's correction
(`housekeeping.node_ledger`) and the ledger audit (`housekeeping.ledger_audit`) alike."""

from django.db.models import IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task


def gpu_used_recount() -> Coalesce:
    """The cards the node's active tasks ask for, as an expression over a Node queryset (0 without any)."""
    active_gpus = (Task.objects.filter(node_id=OuterRef("id"), status__in=ACTIVE_STATES).order_by()
                   .values("node_id").annotate(total=Sum("gpu_required")).values("total"))
    return Coalesce(Subquery(active_gpus, output_field=IntegerField()), Value(0))
