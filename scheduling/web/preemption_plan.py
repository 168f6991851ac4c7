"""The task page's "If it preempted now" panel: the preemption plan of a pending task in words."""

from typing import Any

from heteroflow_site.web import throttled_for
from scheduling.api.preemption_plan_apis import PreemptionPlanThrottle
from scheduling.models import Task
from scheduling.what_if.preemption_plan import FITS_NOW, preemption_plan
from tenants.selectors import tenant_of

FRAGMENT = "preemption-plan"
TEMPLATE = "scheduling/_preemption_plan.html"


def panel_within_budget(request, *, task: Task) -> dict[str, Any]:
    """The panel, planned only within the budget the API's plan endpoint spends (one budget per user for both):
    every plan reads the whole cluster, and the page would otherwise be a way around the API's throttle."""
    wait = throttled_for(request, PreemptionPlanThrottle)
    if wait is not None:
        return {"plan": {"message": f"too many plans asked for lately; the next one in {int(wait) + 1} s"},
                "headline": "Not planned just now", "evicts": False, "throttled": True}
    return preemption_plan_panel(task=task, user=request.user)


def preemption_plan_panel(*, task: Task, user) -> dict[str, Any]:
    viewer = tenant_of(user)
    plan = preemption_plan(task=task, viewer_tenant_id=viewer.id if viewer else None)
    if "node" in plan:
        count = len(plan["victims"])
        tasks = f"{count} task{'s' if count != 1 else ''}"
        headline = (f"Preempting {tasks} on {plan['node']}: it binds once they have stopped" if plan.get("stopping")
                    else f"Would preempt {tasks} on {plan['node']}")
        return {"plan": plan, "headline": headline, "evicts": True}
    if plan["code"] == FITS_NOW:
        return {"plan": plan, "headline": "No eviction needed", "evicts": False}
    return {"plan": plan, "headline": "No eviction would help", "evicts": False}
