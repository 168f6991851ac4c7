from celery import shared_task

from nodes.services import nodes_mark_silent_offline


@shared_task(name="nodes.tasks.mark_silent_nodes_offline")
def mark_silent_nodes_offline() -> int:
    """The node liveness ticker."""
    return nodes_mark_silent_offline()
