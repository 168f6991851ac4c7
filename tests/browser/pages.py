"""Every page of the product a browser can open, read from the URL configuration so that new pages are included."""

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

# Not pages: the API, the metrics scrape, signing out, the replay report's chart (an image the report page shows), the
# favicon.
# The admin is one page here (its index); the API's two documentation pages are pages.
NOT_PAGES = ("api/", "admin/", "metrics", "logout/", "healthz", "readyz", "plugins/replay/chart.svg", "favicon.ico")
EXTRA_PAGES = ["/admin/", "/api/schema/docs/", "/api/schema/redoc/"]


def product_pages(object_ids: dict[str, int]) -> list[str]:
    """Paths of every page; a route's `<int:name>` takes `object_ids[name]` (routes with other parameters are left
    out: give them an object id here to include them)."""
    pages = []
    for route, converters in _routes(get_resolver().url_patterns, prefix=""):
        if route.startswith(NOT_PAGES) or not set(converters) <= set(object_ids):
            continue
        path = route
        for name in converters:
            path = path.replace(f"<int:{name}>", str(object_ids[name]))
        pages.append("/" + path)
    return sorted(set(pages) | set(EXTRA_PAGES))


def _routes(patterns, *, prefix: str):
    for pattern in patterns:
        if not isinstance(pattern.pattern, RoutePattern):
            continue
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix=route)
        elif isinstance(pattern, URLPattern):
            yield route, list(pattern.pattern.converters)
