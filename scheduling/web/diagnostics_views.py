"""The diagnostics page: recent cycles, attempts by code, the pending queue and the order in force, each tenant's
decayed share (design §17.4), borrowed work, fgd's view of the
workload and what defrag would move (design §16.3)."""

import time

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect
from django.utils import timezone

from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from scheduling.diagnostics.attempts import attempt_counts
from scheduling.fair_share.decayed import decayed_share_listing
from scheduling.fair_share.selectors import borrowed_work
from scheduling.models import CycleRecord
from scheduling.plugins import fgd
from scheduling.queue import immediate_queue
from scheduling.queue.selectors import queue_state
from scheduling.selectors import pending_queue, queue_order_in_force, recent_cycles
from scheduling.web.charts import fragmentation_panel
from scheduling.what_if.defrag_plan import defrag_plan

PENDING_SHOWN = 50
BORROWED_SHOWN = 50
# The panel the page fetches after it loaded: a plan builds a snapshot of the whole cluster.
DEFRAG_FRAGMENT = "defrag-plan"
CYCLE_REQUESTED = "Cycle requested: the scheduler runs it within a second."
# How long the page waits for the requested cycle before it says that none ran.
CYCLE_REQUEST_PATIENCE_SECONDS = 10


def _cycle_request(query) -> dict:
    """What became of "Run a cycle now": the first cycle after the request, still waiting, or none in time."""
    after = positive_int_or_none(query.get("after", "")) or 0
    asked = positive_int_or_none(query.get("asked", "")) or 0
    ran = CycleRecord.objects.filter(id__gt=after).order_by("id").first()
    if ran is not None:
        return {"ran": ran}
    if time.time() - asked > CYCLE_REQUEST_PATIENCE_SECONDS:
        return {"late": CYCLE_REQUEST_PATIENCE_SECONDS}
    return {"waiting": True, "after": after, "asked": asked}


@staff_required
def diagnostics(request):
    """The page; a POST ("run a cycle now") asks the scheduler for a cycle rather than running one in the request:
    the cycles table shows it as soon as it finishes (it is pushed over the websocket). The defrag panel is a
    fragment of its own, asked for once the page is shown."""
    if request.method == "GET" and request.htmx and request.htmx.target == DEFRAG_FRAGMENT:
        return render_page(request, "scheduling/diagnostics.html", {"defrag": defrag_plan()},
                           fragment=DEFRAG_FRAGMENT)
    if request.method == "POST":
        latest = CycleRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
        immediate_queue.request_cycle()
        if not request.htmx:
            messages.success(request, CYCLE_REQUESTED)
            return redirect("diagnostics")
        return render_page(request, "scheduling/diagnostics.html",
                           {"cycle_request": {"waiting": True, "after": latest, "asked": int(time.time())}},
                           fragment="cycle-request")
    if request.htmx and request.htmx.target == "cycle-request":
        return render_page(request, "scheduling/diagnostics.html", {"cycle_request": _cycle_request(request.GET)},
                           fragment="cycle-request")
    now = timezone.now()
    context = {
        "cycles": recent_cycles(),
        "attempt_counts": [{"code": code, "count": count} for code, count in attempt_counts().items()],
        "pending": [{"task": task, "queue": queue_state(task, now=now)}
                    for task in pending_queue(limit=PENDING_SHOWN)],
        "borrowed": borrowed_work()[:BORROWED_SHOWN],
        "borrowed_count": borrowed_work().count(),
        "fragmentation": fragmentation_panel(),
        "target_workload": fgd.target_workload_summary(),
        "queue_order": queue_order_in_force(),
        "decayed_shares": decayed_share_listing(),
        "half_life_days": settings.HETEROFLOW_FAIR_SHARE_HALF_LIFE,
    }
    return render_page(request, "scheduling/diagnostics.html", context, fragment="recent-cycles")

