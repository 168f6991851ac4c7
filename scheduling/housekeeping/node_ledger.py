"""The heartbeat ledger: a node's `gpu_used` recounted from the tasks that hold its cards."""

import logging

from django.db import transaction
from django.dispatch import receiver

from nodes.models import Node, NodeAuditEntry
from nodes.signals import heartbeat_recorded
from scheduling import metrics
from scheduling.cache.gpu_ledger import gpu_used_recount
from scheduling.housekeeping.ledger_audit import LedgerAudit
from scheduling.queue.services import queue_activate

logger = logging.getLogger(__name__)

CORRECTION_ACTION = "ledger.correct"


@receiver(heartbeat_recorded, dispatch_uid="scheduling.housekeeping.node_ledger.recount_on_heartbeat")
def recount_on_heartbeat(sender, *, node_id: int, **kwargs) -> None:
    if node_gpu_used_recount(node_id=node_id) is not None:
        # The ledger may have freed cards: parked work may fit now (design §15.1).
        queue_activate(reason=f"gpu_used of node {node_id} recounted")


def node_gpu_used_recount(*, node_id: int) -> int | None:
    """Set `gpu_used` to SUM(gpu_required) of the node's active tasks (`cache.gpu_ledger.gpu_used_recount`).

    Returns the corrected value, or None when the ledgers agreed. The stored value and the sum are read in one
    statement AFTER taking the node's row lock in an earlier one: a transition that already moved the counter held
    that lock until it committed (so the fresh snapshot sees its task too), one that has not yet moved it must wait
    for us (so we see neither). Reading under `FOR UPDATE` in the same statement would not do: after waiting for the
    lock, PostgreSQL re-reads the node row but keeps the old snapshot for the sum.
    """
    with transaction.atomic():
        if not Node.objects.select_for_update().filter(id=node_id).exists():
            return None
        row = (
            Node.objects.filter(id=node_id)
            .annotate(recount=gpu_used_recount())
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
        metrics.record_ledger_corrections("node_gpu_used")
        return row["recount"]
    return None


def node_ledgers_correct(*, audit: LedgerAudit, actor=None) -> list[tuple[str, int, int]]:
    """Set each wrong `gpu_used` to its recount, under the node's row lock (the recount of design §7, so a bind
    racing it is ordered), with an audit row in the same transaction. Returns (node, before, after) per correction."""
    corrections = []
    for node in audit.nodes:
        if not node.gpu_used_wrong:
            continue
        with transaction.atomic():
            before = Node.objects.select_for_update().filter(id=node.node_id).values_list("gpu_used", flat=True)
            before = before.first()
            after = node_gpu_used_recount(node_id=node.node_id) if before is not None else None
            if after is None:  # gone, or right again by the time the lock was ours
                continue
            NodeAuditEntry.objects.create(node_id=node.node_id, actor=actor, action=CORRECTION_ACTION,
                                          before={"gpu_used": before}, after={"gpu_used": after})
        corrections.append((node.name, before, after))
    return corrections
