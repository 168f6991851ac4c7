"""Credentials of node agents: the per-node token and the cluster join token. Neither makes a user."""

import hmac

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from heteroflow_site.permissions import is_admin
from nodes.models import Node
from nodes.services import NODE_TOKEN_PREFIX, node_for_token

JOIN_TOKEN = "join-token"


def _token_from_header(request) -> str | None:
    parts = get_authorization_header(request).split()
    if len(parts) != 2 or parts[0].lower() != b"token":
        return None
    try:
        return parts[1].decode()
    except UnicodeError:
        return None


class NodeTokenAuthentication(BaseAuthentication):
    """`Authorization: Token <node token>` → request.auth is the Node, request.user stays anonymous.

    Because the caller is not a user, user routes (tasks, tenancy, admin) keep refusing it.
    """

    def authenticate(self, request):
        token = _token_from_header(request)
        if token is None or not token.startswith(NODE_TOKEN_PREFIX):
            # Not a node token: another authentication class (or the permission check) answers.
            return None
        node = node_for_token(token)
        if node is None:
            raise exceptions.AuthenticationFailed("invalid node token")
        return AnonymousUser(), node

    def authenticate_header(self, request) -> str:
        return "Token"


class JoinTokenAuthentication(BaseAuthentication):
    """The cluster join token (setting HETEROFLOW_JOIN_TOKEN) lets a new agent register; any other token is left
    to the next authentication class (an admin's DRF token)."""

    def authenticate(self, request):
        token = _token_from_header(request)
        join_token = settings.HETEROFLOW_JOIN_TOKEN
        # A guessable join token is no join token (design §16.5; the settings refuse one at start too).
        if token is None or len(join_token) < settings.MIN_JOIN_TOKEN_LENGTH or not hmac.compare_digest(
                token.encode(), join_token.encode()):
            return None
        return AnonymousUser(), JOIN_TOKEN

    def authenticate_header(self, request) -> str:
        return "Token"


class IsNodeAgent(BasePermission):
    message = "a node agent token is required"

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)


class MayRegisterNodes(BasePermission):
    """Admins, the cluster join token (new names only) and a node's own token (its own name only; the service
    checks the name)."""

    message = "registering a node needs an admin token, the cluster join token or the node's own token"

    def has_permission(self, request, view) -> bool:
        if request.auth == JOIN_TOKEN or isinstance(request.auth, Node):
            return True
        return is_admin(request.user)


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = NodeTokenAuthentication
    name = "nodeToken"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <node token>` as returned by POST /api/v1/agent/register"}


class JoinTokenScheme(OpenApiAuthenticationExtension):
    target_class = JoinTokenAuthentication
    name = "joinToken"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <HETEROFLOW_JOIN_TOKEN>`, the cluster join token"}


class AgentApi(APIView):
    """Routes only a node agent may call; `request.auth` is its Node."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
