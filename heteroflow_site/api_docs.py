"""The API's documentation pages (Swagger UI, ReDoc), served from drf-spectacular-sidecar's static files."""

from drf_spectacular.views import SpectacularRedocView

# ReDoc's menu always shows an <img> of Redocly's logo from Redocly's CDN; the policy stops that one request (the
# image hides itself when it fails), so this page too loads nothing from another host.
SAME_HOST_ONLY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:"


class RedocView(SpectacularRedocView):
    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Content-Security-Policy"] = SAME_HOST_ONLY
        return response
