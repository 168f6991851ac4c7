from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from heteroflow_site.api_docs import RedocView, redoc_bundle
from heteroflow_site.health import healthz, readyz
from scheduling.api.metrics_views import metrics

class FaviconRedirect(RedirectView):
    """Browsers ask for /favicon.ico on pages that name no icon (the API's documentation)."""

    permanent = True

    def get_redirect_url(self, *args, **kwargs):
        return static("favicon.svg")


api_v1 = [
    path("", include("tenants.api_urls")),
    path("", include("scheduling.api.urls")),
    path("", include("nodes.api_urls")),
    path("", include("plugins_admin.api_urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/schema/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="schema-docs"),
    path("api/schema/redoc/", RedocView.as_view(url_name="schema"), name="schema-redoc"),
    path("api/schema/redoc/redoc.standalone.js", redoc_bundle, name="schema-redoc-bundle"),
    path("favicon.ico", FaviconRedirect.as_view(), name="favicon"),
    path("metrics", metrics, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("", include("plugins_admin.urls")),
    path("", include("tenants.urls")),
    path("", include("nodes.urls")),
    path("", include("scheduling.web.urls")),
]

handler400 = "heteroflow_site.api_errors.bad_request"
handler403 = "heteroflow_site.api_errors.permission_denied"
handler404 = "heteroflow_site.api_errors.page_not_found"
handler500 = "heteroflow_site.api_errors.server_error"
