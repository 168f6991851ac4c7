"""The task page's live log panel (design §16.4): its first lines as a fragment, then each new batch pushed over
`ws/tasks/<id>/logs/` and appended by htmx. Who may watch is who may read the task: its tenant's users and staff."""

from django.contrib.auth.decorators import login_required
from django.dispatch import receiver
from django.http import Http404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse

from heteroflow_site.websockets import GuardedConsumer
from scheduling.services.log_reading import task_log_slice
from scheduling.selectors import tasks_visible_to
from scheduling.signals import task_log_appended
from scheduling.web.live import publish

PANEL_LINES = 500
TEMPLATE = "scheduling/_task_log.html"


def task_log_group(task_id: int) -> str:
    return f"task_log_{task_id}"


def _may_read(user, task_id: int) -> bool:
    return tasks_visible_to(user).filter(id=task_id).exists()


@login_required
def task_log_panel(request, task_id: int):
    if not _may_read(request.user, task_id):
        raise Http404("no such task")
    piece = task_log_slice(task_id=task_id, tail_lines=PANEL_LINES)
    return TemplateResponse(request, TEMPLATE, {"task_id": task_id, "log": piece, "panel_lines": PANEL_LINES})


class TaskLogConsumer(GuardedConsumer):
    group: str | None = None

    def allowed(self, user) -> bool:
        return _may_read(user, int(self.scope["url_route"]["kwargs"]["task_id"]))

    async def joined(self):
        self.group = task_log_group(int(self.scope["url_route"]["kwargs"]["task_id"]))
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def disconnect(self, code):
        await super().disconnect(code)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def task_log(self, event):
        await self.send(text_data=render_to_string(f"{TEMPLATE}#log-lines", {"text": event["text"], "oob": True}))


@receiver(task_log_appended, dispatch_uid="scheduling.web.log_views.task_log")
def broadcast_task_log(sender, *, task_id: int, text: str, **kwargs) -> None:
    publish(task_log_group(task_id), {"type": "task.log", "text": text})
