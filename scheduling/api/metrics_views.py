import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from heteroflow_site.permissions import is_admin
from scheduling.metrics import ClusterCollector

_registry = CollectorRegistry(auto_describe=False)
_registry.register(ClusterCollector())


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus scrape endpoint: staff sessions, or `Authorization: Bearer <HETEROFLOW_METRICS_TOKEN>`."""
    expected = settings.HETEROFLOW_METRICS_TOKEN
    bearer = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    allowed = is_admin(request.user) or (
        bool(expected) and secrets.compare_digest(bearer.encode(), expected.encode())
    )
    if not allowed:
        return HttpResponse("metrics need a staff session or the metrics token\n", status=403,
                            content_type="text/plain")
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
