"""Failed authentications under /api/ are throttled per client address (design §16.5).

DRF authenticates before its throttles run, so a wrong token is refused with a 401 that no throttle ever counts:
guessing tokens would cost nothing. Each 401 counts against the caller's address (`client_ip`); past
`HETEROFLOW_AUTH_FAILURES_PER_MINUTE` in a minute, that address gets 429s on the API until the minute is over,
whatever credentials it sends. Like the other throttles, counts live in the process's cache.
"""

from django.conf import settings
from django.core.cache import cache
from django.http import JsonResponse

from heteroflow_site.api_errors import API_PREFIX, error_body
from heteroflow_site.middleware import Middleware
from heteroflow_site.client_ip import client_ip

WINDOW_SECONDS = 60


class FailedAuthenticationGate(Middleware):
    """429 on the API for an address past its failed authentications of the minute; every 401 counts."""

    def handle(self, request):
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        if _over_budget(request):
            return _refusal()
        response = self.get_response(request)
        _count(request, response)
        return response


def _over_budget(request) -> bool:
    return cache.get(_key(request), 0) >= settings.HETEROFLOW_AUTH_FAILURES_PER_MINUTE


def _count(request, response) -> None:
    if response.status_code != 401:
        return
    key = _key(request)
    cache.add(key, 0, timeout=WINDOW_SECONDS)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=WINDOW_SECONDS)


def _key(request) -> str:
    return f"auth-failures:{client_ip(request)}"


def _refusal() -> JsonResponse:
    response = JsonResponse(error_body("throttled", "too many failed authentications from this address; try "
                                                    f"again within {WINDOW_SECONDS} seconds"), status=429)
    response["Retry-After"] = str(WINDOW_SECONDS)
    return response
