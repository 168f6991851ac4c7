"""The API's documentation pages (Swagger UI, ReDoc), served from drf-spectacular-sidecar's static files."""

from functools import cache
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpResponse
from django.templatetags.static import static
from django.urls import reverse
from drf_spectacular.views import SpectacularRedocView

# The page loads nothing from another host and breaks no rule of its own policy (no console error either).
SAME_HOST_ONLY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:"
# ReDoc's menu always shows an <img> of Redocly's logo from Redocly's CDN: the bundle is served with our own mark.
REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"


class RedocView(SpectacularRedocView):
    @staticmethod
    def _redoc_standalone():
        return reverse("schema-redoc-bundle")

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = SAME_HOST_ONLY
        return response


@cache
def _redoc_bundle() -> bytes:
    text = Path(finders.find(REDOC_BUNDLE)).read_text(encoding="utf-8")
    return text.replace(REDOCLY_LOGO, static("favicon.svg")).encode()


def redoc_bundle(request):
    response = HttpResponse(_redoc_bundle(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response
