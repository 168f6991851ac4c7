"""What every app's pages share: the staff gate and the page-or-fragment render."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from heteroflow_site.permissions import is_admin


def staff_required(view):
    """Anonymous users go to the login page; signed-in tenants get 403."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied("staff only")
        return view(request, *args, **kwargs)

    return guarded


def render_page(request, template: str, context: dict, *, fragment: str | None = None,
                status: int = 200) -> TemplateResponse:
    """The whole page, or only `fragment` (a partialdef of the same template) for htmx requests."""
    name = f"{template}#{fragment}" if fragment and request.htmx else template
    return TemplateResponse(request, name, context, status=status)


def throttled_for(request, throttle_class) -> float | None:
    """A DRF throttle spent by a page: the page and its API endpoint draw on one budget (the throttle's scope and
    the user). None when the request may go on, else the seconds to wait."""
    throttle = throttle_class()
    if throttle.allow_request(request, None):
        return None
    return throttle.wait() or 0.0
