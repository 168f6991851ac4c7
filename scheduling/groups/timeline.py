"""The group's own timeline (design §17.2): what held or changed a group as a whole, with its figures."""

import logging

from scheduling.models import REASON_MAX_LENGTH, GroupEvent, TaskGroup

logger = logging.getLogger(__name__)


def note(group: TaskGroup, kind: str, message: str, *, figures: dict, once: bool = False) -> None:
    """Put an entry on the group's timeline; `once`: not again while the latest entry says the same (a hold that
    every tick meets is told once, not every 5 s)."""
    message = message[:REASON_MAX_LENGTH]
    if once and group.events.order_by("-at", "-id").values_list("kind", "message").first() == (kind, message):
        return
    GroupEvent.objects.create(group=group, kind=kind, message=message, figures=figures)
    logger.info("group %s: %s", group.id, message)
