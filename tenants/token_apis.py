"""`POST /api/v1/auth/token` (design §16.4): username and password for an API token, so a command-line client
needs no browser. Throttled per address, and locked out after failed attempts exactly like the login page
(django-axes, one counter for both); a refusal never says whether the user exists."""

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from heteroflow_site.api_errors import error_body
from heteroflow_site.client_ip import ClientAddressIdent
from heteroflow_site.serializers import StrictSerializer, validated
from tenants.apis import token_name_field
from tenants.services import user_token_issue

INVALID_CREDENTIALS = "invalid username or password"


class AuthTokenThrottle(ClientAddressIdent, AnonRateThrottle):
    """Per address, whoever the caller claims to be: password guessing is slowed before the lockout counts."""

    scope = "auth_token"


class AuthTokenApi(APIView):
    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [AuthTokenThrottle]

    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=128, write_only=True, trim_whitespace=False)
        name = token_name_field("signed in with a password")

    @extend_schema(
        request=InputSerializer,
        responses={201: inline_serializer("IssuedToken", {"token": serializers.CharField(),
                                                          "expiry": serializers.DateTimeField(allow_null=True)}),
                   # Not a 400: the request is what the schema describes; the credentials are wrong (and count as
                   # a failed authentication of the address, heteroflow_site.auth_failures).
                   401: OpenApiResponse(description=f"`invalid_credentials`: {INVALID_CREDENTIALS}"),
                   429: OpenApiResponse(description="`locked_out` after repeated failures, or `throttled`")},
        auth=[])
    def post(self, request):
        credentials = validated(self.InputSerializer, request.data)
        # The Django request: django-axes reads and marks it (the lockout counter is the login page's).
        django_request = request._request
        user = authenticate(django_request, username=credentials["username"], password=credentials["password"])
        if getattr(django_request, "axes_locked_out", False):
            # Answered here in the API's error shape, so axes' middleware must not put its page in its place.
            django_request.axes_locked_out = False
            body = error_body("locked_out", "too many failed attempts for this username from this address; "
                                            "try again later")
            return Response(body, status=status.HTTP_429_TOO_MANY_REQUESTS)
        if user is None:
            return Response(error_body("invalid_credentials", INVALID_CREDENTIALS), status=status.HTTP_401_UNAUTHORIZED)
        instance, token = user_token_issue(user=user, name=credentials["name"])
        return Response({"token": token, "expiry": instance.expiry}, status=status.HTTP_201_CREATED)
