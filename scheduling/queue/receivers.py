"""Changes the apps below scheduling announce that may let parked work fit: activate it (design §15.1)."""

from django.dispatch import receiver

from nodes.signals import node_changed
from scheduling.queue.services import queue_activate
from tenants.signals import tenancy_changed


@receiver(node_changed, dispatch_uid="scheduling.queue.receivers.node_changed")
def activate_on_node_change(sender, *, node_id: int, reason: str, **kwargs) -> None:
    queue_activate(reason=reason)


@receiver(tenancy_changed, dispatch_uid="scheduling.queue.receivers.tenancy_changed")
def activate_on_tenancy_change(sender, *, tenant_id: int | None, reason: str, **kwargs) -> None:
    queue_activate(reason=reason, tenant_id=tenant_id)
