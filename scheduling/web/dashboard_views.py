"""The dashboard: the cluster at a glance."""

from django.contrib.auth.decorators import login_required
from django.utils import timezone

from heteroflow_site.web import render_page
from nodes.selectors import capacity_by_architecture, nodes_by_status
from scheduling import lifecycle
from scheduling.fair_share.selectors import tenant_share
from scheduling.history.markers import markers_since
from scheduling.history.samples import HISTORY_KEEP
from scheduling.selectors import pending_by_code, recent_cycles, tasks_visible_to
from scheduling.web.charts import capacity_chart, fragmentation_panel
from scheduling.web.history_chart import history_charts
from tenants.selectors import tenant_of


@login_required
def dashboard(request):
    tasks = tasks_visible_to(request.user)
    capacity = capacity_by_architecture()
    tenant = tenant_of(request.user)
    context = {
        # A tenant's own share of the cluster (design §16.2); admins see every tenant's on the sharing page.
        "share": tenant_share(tenant) if tenant is not None else None,
        "capacity": capacity,
        "chart": capacity_chart(capacity),
        "totals": {key: sum(row[key] for row in capacity)
                   for key in ("total", "used", "free", "offline", "quarantined")},
        "nodes_by_status": nodes_by_status(),
        "pending_by_code": pending_by_code(tasks),
        "active_tasks": tasks.filter(status__in=lifecycle.ACTIVE_STATES).count(),
        "pending_tasks": tasks.filter(status=lifecycle.PENDING).count(),
        "cycles": recent_cycles(),
        "fragmentation": fragmentation_panel(),
        "history": (history_charts(markers=markers_since(timezone.now() - HISTORY_KEEP))
                    if request.user.is_staff else None),
    }
    return render_page(request, "scheduling/dashboard.html", context)
