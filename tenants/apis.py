from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from knox.models import AuthToken
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer, validated
from heteroflow_site.validation import GPU_QUOTA_MAX, NameField
from tenants.authentication import UserTokenAuthentication
from tenants.models import MAX_PRIORITY, TOKEN_NAME_MAX_LENGTH, ShareGroup, Tenant
from tenants.services import (
    share_group_create,
    share_group_delete,
    share_group_update,
    tenant_create,
    tenant_update,
    tenant_user_create,
    user_token_issue,
    user_tokens_revoke,
)


class TenantOutput(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "name", "status", "gpu_quota", "max_priority", "cohort", "created_at"]


class TenantListCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = NameField()
        gpu_quota = serializers.IntegerField(min_value=0, max_value=GPU_QUOTA_MAX, required=False, allow_null=True,
                                             default=None)
        status = serializers.ChoiceField(choices=Tenant.Status.choices, required=False, default=Tenant.Status.ACTIVE)

    @extend_schema(responses=TenantOutput(many=True))
    def get(self, request):
        return Response(TenantOutput(Tenant.objects.all(), many=True).data)

    @extend_schema(request=InputSerializer, responses={201: TenantOutput})
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        tenant = tenant_create(actor=request.user, **payload.validated_data)
        return Response(TenantOutput(tenant).data, status=status.HTTP_201_CREATED)


class TenantDetailApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        gpu_quota = serializers.IntegerField(min_value=0, max_value=GPU_QUOTA_MAX, required=False, allow_null=True)
        status = serializers.ChoiceField(choices=Tenant.Status.choices, required=False)
        max_priority = serializers.IntegerField(min_value=0, max_value=MAX_PRIORITY, required=False)

    @extend_schema(responses=TenantOutput)
    def get(self, request, tenant_id: int):
        return Response(TenantOutput(get_object_or_404(Tenant, id=tenant_id)).data)

    @extend_schema(request=InputSerializer, responses=TenantOutput)
    def patch(self, request, tenant_id: int):
        get_object_or_404(Tenant, id=tenant_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        tenant = tenant_update(tenant_id=tenant_id, actor=request.user, **payload.validated_data)
        return Response(TenantOutput(tenant).data)


class TenantUserCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        username = serializers.RegexField(r"^[\w.@+-]+\Z", max_length=150)
        password = serializers.CharField(min_length=8, max_length=128, write_only=True)

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        username = serializers.CharField()
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request, tenant_id: int):
        tenant = get_object_or_404(Tenant, id=tenant_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        user, token = tenant_user_create(tenant=tenant, actor=request.user, **payload.validated_data)
        body = {"id": user.id, "username": user.username, "token": token}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class ShareGroupOutput(serializers.ModelSerializer):
    tenants = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = ShareGroup
        fields = ["id", "name", "tenants", "created_at"]


class ShareGroupListCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = NameField()
        tenants = serializers.PrimaryKeyRelatedField(many=True, queryset=Tenant.objects.all())

    @extend_schema(responses=ShareGroupOutput(many=True))
    def get(self, request):
        return Response(ShareGroupOutput(ShareGroup.objects.prefetch_related("tenants"), many=True).data)

    @extend_schema(request=InputSerializer, responses={201: ShareGroupOutput})
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        group = share_group_create(actor=request.user, **payload.validated_data)
        return Response(ShareGroupOutput(group).data, status=status.HTTP_201_CREATED)


class ShareGroupDetailApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = NameField()
        tenants = serializers.PrimaryKeyRelatedField(many=True, queryset=Tenant.objects.all())

    @extend_schema(responses=ShareGroupOutput)
    def get(self, request, group_id: int):
        return Response(ShareGroupOutput(get_object_or_404(ShareGroup, id=group_id)).data)

    @extend_schema(request=InputSerializer, responses=ShareGroupOutput)
    def put(self, request, group_id: int):
        get_object_or_404(ShareGroup, id=group_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        group = share_group_update(group_id=group_id, actor=request.user, **payload.validated_data)
        return Response(ShareGroupOutput(group).data)

    @extend_schema(responses={204: None})
    def delete(self, request, group_id: int):
        get_object_or_404(ShareGroup, id=group_id)
        share_group_delete(group_id=group_id, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenOutput(serializers.Serializer):
    token_key = serializers.CharField(help_text="the token's first characters, which name it for revoking")
    name = serializers.CharField(source="token_name.name", allow_null=True,
                                 help_text="which client it is for; null for a token issued before tokens had names")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)


# The rule of `tenants.services.token_name_checked` as the schema publishes it: something besides blanks, and no
# control characters.
TOKEN_NAME_PATTERN = r"^(?=.*\S)[^\u0000-\u001f\u007f]*$"


def token_name_field(default: str) -> serializers.RegexField:
    """A token's name as an API input: optional, `default` saying how it was issued when the client names none."""
    return serializers.RegexField(TOKEN_NAME_PATTERN, max_length=TOKEN_NAME_MAX_LENGTH, required=False,
                                  default=default, help_text=f"which client or script it is for (default: {default!r})",
                                  error_messages={"invalid": "a name needs a printable character besides blanks, and "
                                                             "no control characters"})


class TokenListCreateApi(APIView):
    """The caller's own API tokens: list them, issue another (shown once), revoke one by its key."""

    permission_classes = [IsAuthenticated]

    class InputSerializer(StrictSerializer):
        name = token_name_field("issued with another token")

    class CreatedOutput(TokenOutput):
        token = serializers.CharField()

    @extend_schema(responses=TokenOutput(many=True))
    def get(self, request):
        tokens = AuthToken.objects.filter(user=request.user).select_related("token_name").order_by("-created")
        return Response(TokenOutput(tokens, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: CreatedOutput})
    def post(self, request):
        if not isinstance(request.successful_authenticator, UserTokenAuthentication):
            # A browser's session mints on the tokens page, which asks for the password again: a session left open
            # (or stolen) does not turn into tokens that outlive it.
            raise PermissionDenied("issue tokens with an API token, with POST /api/v1/auth/token, or on the tokens "
                                   "page (it asks for your password)")
        instance, token = user_token_issue(user=request.user, **validated(self.InputSerializer, request.data))
        body = {"token": token, "token_key": instance.token_key, "created": instance.created,
                "expiry": instance.expiry, "token_name": instance.token_name}
        return Response(self.CreatedOutput(body).data, status=status.HTTP_201_CREATED)


class TokenRevokeThrottle(UserRateThrottle):
    """Per user, the page's revocations included: revoking is cheap to ask for and each one is audited."""

    scope = "token_revoke"


class TokenDetailApi(APIView):
    permission_classes = [IsAuthenticated]
    throttle_classes = [*APIView.throttle_classes, TokenRevokeThrottle]

    @extend_schema(responses={204: None})
    def delete(self, request, token_key: str):
        if not user_tokens_revoke(user=request.user, actor=request.user, token_key=token_key):
            raise NotFound(f"you have no token {token_key!r}")
        return Response(status=status.HTTP_204_NO_CONTENT)


class UserTokensRevokeApi(APIView):
    """Admins revoke every API token of a user (a leaked token, someone leaving)."""

    permission_classes = [IsAdmin]

    class OutputSerializer(serializers.Serializer):
        revoked = serializers.IntegerField()

    @extend_schema(request=None, responses=OutputSerializer)
    def post(self, request, user_id: int):
        user = get_object_or_404(get_user_model(), id=user_id)
        revoked = user_tokens_revoke(user=user, actor=request.user)
        return Response(self.OutputSerializer({"revoked": revoked}).data)
