"""Websocket consumers pushing ready-made HTML fragments that htmx's ws extension swaps in by id. Each keeps to the
per-user cap and checks its user's right again while open (`heteroflow_site.websockets`)."""

from channels.db import database_sync_to_async

from heteroflow_site.permissions import is_admin
from heteroflow_site.websockets import GuardedConsumer
from scheduling.web.live import (
    ALL_TASKS_GROUP,
    DIAGNOSTICS_GROUP,
    recent_cycles_html,
    task_rows_html,
    tenant_group,
)
from tenants.selectors import tenant_of


class _FragmentConsumer(GuardedConsumer):
    group: str | None = None

    async def disconnect(self, code):
        await super().disconnect(code)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _join(self, group: str) -> None:
        self.group = group
        await self.channel_layer.group_add(group, self.channel_name)


class DiagnosticsConsumer(_FragmentConsumer):
    """The recent cycles, rendered here when a cycle ends, staff only."""

    def allowed(self, user) -> bool:
        return is_admin(user)

    async def joined(self):
        await self._join(DIAGNOSTICS_GROUP)

    async def cycle_summary(self, event):
        await self.send(text_data=await database_sync_to_async(recent_cycles_html)())


class TaskStatusConsumer(_FragmentConsumer):
    """Status changes of the tasks the user may see: its tenant's, or every task for staff. Messages carry task
    ids; the rows are read and rendered here, limited to the user's tenant whatever the message says."""

    tenant_id: int | None = None
    admin: bool | None = None

    def allowed(self, user) -> bool:
        """Staff, or a user of a tenant; while open, what it was at connect (a user who left staff or changed tenant
        joined another group, and is closed)."""
        admin = is_admin(user)
        tenant = None if admin else tenant_of(user)
        if self.admin is None:
            self.admin, self.tenant_id = admin, tenant.id if tenant else None
        return (admin or tenant is not None) and admin == self.admin and (admin or tenant.id == self.tenant_id)

    async def joined(self):
        await self._join(ALL_TASKS_GROUP if self.admin else tenant_group(self.tenant_id))

    async def task_status(self, event):
        html = await database_sync_to_async(task_rows_html)(event["task_ids"], tenant_id=self.tenant_id)
        if html:
            await self.send(text_data=html)
