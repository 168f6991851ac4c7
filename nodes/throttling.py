"""API rate limits (DRF throttles): per anonymous address, per signed-in user and per node agent token."""

from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from heteroflow_site.client_ip import ClientAddressIdent
from nodes.models import Node


def _is_node(request) -> bool:
    return isinstance(getattr(request, "auth", None), Node)


class AnonymousThrottle(ClientAddressIdent, AnonRateThrottle):
    """Callers with no user and no node token, by address (as the proxy settings let it be known)."""

    def get_cache_key(self, request, view):
        return None if _is_node(request) else super().get_cache_key(request, view)


class UserThrottle(UserRateThrottle):
    """Signed-in users (token or session), by user id."""

    def get_cache_key(self, request, view):
        if not request.user or not request.user.is_authenticated:
            return None
        return super().get_cache_key(request, view)


class NodeTokenThrottle(SimpleRateThrottle):
    """Node agents, by node: one runaway agent cannot crowd the others out."""

    scope = "node"

    def get_cache_key(self, request, view):
        if not _is_node(request):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.id}
