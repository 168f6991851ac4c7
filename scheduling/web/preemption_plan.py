"""The task page's "If it preempted now" panel: the preemption plan of a pending task in words."""

from typing import Any

from scheduling.what_if.preemption_plan import FITS_NOW, preemption_plan
from tenants.selectors import tenant_of

FRAGMENT = "preemption-plan"
TEMPLATE = "scheduling/_preemption_plan.html"


def preemption_plan_panel(*, task_id: int, user) -> dict[str, Any]:
    viewer = tenant_of(user)
    plan = preemption_plan(task_id=task_id, viewer_tenant_id=viewer.id if viewer else None)
    if "node" in plan:
        count = len(plan["victims"])
        tasks = f"{count} task{'s' if count != 1 else ''}"
        headline = (f"Preempting {tasks} on {plan['node']}: it binds once they have stopped" if plan.get("stopping")
                    else f"Would preempt {tasks} on {plan['node']}")
        return {"plan": plan, "headline": headline, "evicts": True}
    if plan["code"] == FITS_NOW:
        return {"plan": plan, "headline": "No eviction needed", "evicts": False}
    return {"plan": plan, "headline": "No eviction would help", "evicts": False}
