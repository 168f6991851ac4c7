"""Websocket consumers pushing ready-made HTML fragments that htmx's ws extension swaps in by id."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from heteroflow_site.permissions import is_admin
from scheduling.web.live import ALL_TASKS_GROUP, DIAGNOSTICS_GROUP, task_rows_html, tenant_group
from tenants.selectors import tenant_of


class _FragmentConsumer(AsyncWebsocketConsumer):
    group: str | None = None

    async def disconnect(self, code):
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _join(self, group: str) -> None:
        self.group = group
        await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()


class DiagnosticsConsumer(_FragmentConsumer):
    """Each cycle's summary, staff only."""

    async def connect(self):
        if not is_admin(self.scope.get("user")):
            await self.close(code=4403)
            return
        await self._join(DIAGNOSTICS_GROUP)

    async def cycle_summary(self, event):
        await self.send(text_data=event["html"])


class TaskStatusConsumer(_FragmentConsumer):
    """Status changes of the tasks the user may see: its tenant's, or every task for staff. Messages carry task
    ids; the rows are read and rendered here, limited to the user's tenant whatever the message says."""

    tenant_id: int | None = None

    async def connect(self):
        user = self.scope.get("user")
        if is_admin(user):
            await self._join(ALL_TASKS_GROUP)
            return
        tenant = await database_sync_to_async(tenant_of)(user)
        if tenant is None:
            await self.close(code=4403)
            return
        self.tenant_id = tenant.id
        await self._join(tenant_group(tenant.id))

    async def task_status(self, event):
        html = await database_sync_to_async(task_rows_html)(event["task_ids"], tenant_id=self.tenant_id)
        if html:
            await self.send(text_data=html)
