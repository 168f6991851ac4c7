"""`PATCH /api/v1/task-groups/{id}` and the group page's Scale and Update forms (design §17.2): one change."""

from scheduling.groups.rollout import task_group_update
from scheduling.groups.scale import task_group_scale
from scheduling.models import TaskGroup


def task_group_change(*, group: TaskGroup, fields: dict) -> TaskGroup:
    """A validated `TaskGroupChangeInput`: the scale first, then the new revision."""
    if "replicas" in fields:
        group = task_group_scale(group=group, replicas=fields["replicas"])
    if {"image", "command", "env"} & set(fields):
        task_group_update(group=group, image=fields.get("image"), command=fields.get("command"),
                          env=fields.get("env"))
    return group
