"""The heartbeat ledger: a node's `gpu_used` recounted from the tasks that hold its cards."""

import logging

from django.db import transaction
from django.db.models import IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.dispatch import receiver

from nodes.models import Node
from nodes.signals import heartbeat_recorded
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task

logger = logging.getLogger(__name__)


@receiver(heartbeat_recorded, dispatch_uid="scheduling.services.node_ledger.recount_on_heartbeat")
def recount_on_heartbeat(sender, *, node_id: int, **kwargs) -> None:
    node_gpu_used_recount(node_id=node_id)


def node_gpu_used_recount(*, node_id: int) -> int | None:
    """Set `gpu_used` to SUM(gpu_required) of the node's active tasks.

    Returns the corrected value, or None when the ledgers agreed. The stored value and the sum are read in one
    statement AFTER taking the node's row lock in an earlier one: a transition that already moved the counter held
    that lock until it committed (so the fresh snapshot sees its task too), one that has not yet moved it must wait
    for us (so we see neither). Reading under `FOR UPDATE` in the same statement would not do: after waiting for the
    lock, PostgreSQL re-reads the node row but keeps the old snapshot for the sum.
    """
    active_gpus = (
        Task.objects.filter(node_id=OuterRef("id"), status__in=ACTIVE_STATES)
        .order_by()
        .values("node_id")
        .annotate(total=Sum("gpu_required"))
        .values("total")
    )
    with transaction.atomic():
        if not Node.objects.select_for_update().filter(id=node_id).exists():
            return None
        row = (
            Node.objects.filter(id=node_id)
            .annotate(recount=Coalesce(Subquery(active_gpus, output_field=IntegerField()), Value(0)))
            .values("name", "gpu_used", "recount")
            .first()
        )
        if row["gpu_used"] == row["recount"]:
            return None
        corrected = Node.objects.filter(id=node_id, gpu_used=row["gpu_used"]).update(gpu_used=row["recount"])
    if corrected:
        logger.warning(
            "gpu_used ledger of node %s disagreed with its active tasks: stored %s, recounted %s; corrected",
            row["name"], row["gpu_used"], row["recount"],
        )
        return row["recount"]
    return None
