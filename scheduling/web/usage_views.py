"""The usage page (design §17.4): card-hours per day stacked by GPU type, a table per tenant, time to start per
day, range controls and a CSV download. A tenant sees its own; an admin every tenant's."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required

from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import flat_errors
from heteroflow_site.web import render_page
from scheduling.usage.apis import DEFAULT_GROUP_BY, UsageQueryInput
from scheduling.usage.chart import stacked_days
from scheduling.usage.selectors import GROUP_KEYS, UsageQuery, time_to_start_by_day, usage_rows

REPORT_FRAGMENT = "usage-report"


@login_required
def usage_page(request):
    """GET only: the controls are a GET form, so a report is a link one can share; htmx swaps the report in."""
    submitted = {name: request.GET[name] for name in ("from", "to") if request.GET.get(name)}
    if request.GET.getlist("group_by"):
        # The page's checkboxes send one value each; the API's form, one comma-separated value.
        submitted["group_by"] = ",".join(request.GET.getlist("group_by"))
    form = UsageQueryInput(data=submitted)
    context = {"submitted": submitted, "group_keys": GROUP_KEYS, "sees_all": is_admin(request.user),
               "checked": submitted.get("group_by", DEFAULT_GROUP_BY).split(",")}
    if not form.is_valid():
        context["errors"] = flat_errors(form.errors)
        # A refusal is a 400 page; to htmx, which swaps only 2xx answers, the form with its errors.
        return render_page(request, "scheduling/usage.html", context, fragment=REPORT_FRAGMENT,
                           status=200 if request.htmx else 400)
    query: UsageQuery = form.validated_data
    by_day_and_type = usage_rows(user=request.user, query=UsageQuery(query.day_from, query.day_to,
                                                                      ("day", "gpu_type")))
    context.update({
        "query": query,
        "chart": stacked_days(by_day_and_type, day_from=query.day_from, day_to=query.day_to),
        "rows": usage_rows(user=request.user, query=query),
        "starts": time_to_start_by_day(user=request.user, day_from=query.day_from, day_to=query.day_to),
        "csv_url": "/api/v1/usage?" + urlencode({"from": query.day_from, "to": query.day_to,
                                                 "group_by": ",".join(query.group_by), "format": "csv"}),
    })
    return render_page(request, "scheduling/usage.html", context, fragment=REPORT_FRAGMENT)
