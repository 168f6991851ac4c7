"""A group follows its members (design §10): the writers of task state announce moved members
(`group_members_moved`), and the groups' rules run here, in the writer's transaction."""

from django.db import transaction
from django.dispatch import receiver

from scheduling import lifecycle
from scheduling.groups.restart import reconcile_gang
from scheduling.groups.status import refresh_group_status
from scheduling.signals import group_members_moved

# A gang member arriving here may leave the rest of its gang running alone.
GANG_BREAKING = frozenset({lifecycle.FAILED, lifecycle.PENDING, lifecycle.STOPPED})


@receiver(group_members_moved, dispatch_uid="scheduling.groups.receivers.group_members_moved")
def follow_members(sender, *, group_ids: list[int], to_status: str, derive_group_status: bool, **kwargs) -> None:
    """The group's status follows its members in the same transaction; a gang that may have lost a member is
    made whole again right after the commit (`reconcile_gang` transitions tasks itself)."""
    for group_id in group_ids:
        if derive_group_status:
            refresh_group_status(group_id)
        if to_status in GANG_BREAKING:
            transaction.on_commit(lambda group_id=group_id: reconcile_gang(group_id))
