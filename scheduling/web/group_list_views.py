"""The task groups list: every gang and service a user may see, searched, filtered by status, a page at a time."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q

from heteroflow_site.permissions import is_admin
from heteroflow_site.web import render_page
from scheduling.models import TaskGroup
from scheduling.selectors import groups_visible_to

GROUP_PAGE_SIZE = 100


@login_required
def group_list(request):
    admin = is_admin(request.user)
    groups = groups_visible_to(request.user).order_by("-created_at", "-id")
    status = request.GET.get("status", "")
    if status in TaskGroup.Status.values:
        groups = groups.filter(status=status)
    query = request.GET.get("q", "").strip()
    if query:
        words = Q(name__icontains=query)
        if admin:
            words |= Q(tenant__name__icontains=query)
        groups = groups.filter(words)
    filters = {"status": status, "q": query}
    page = Paginator(groups, GROUP_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "groups": page.object_list,
        "page": page,
        "page_query": urlencode({name: value for name, value in filters.items() if value}),
        "filters": filters,
        "statuses": TaskGroup.Status.values,
        "show_tenant": admin,
    }
    return render_page(request, "scheduling/groups.html", context, fragment="group-table")
