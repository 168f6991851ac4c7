from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer
from tenants.models import ShareGroup, Tenant
from tenants.services import (
    share_group_create,
    share_group_delete,
    share_group_update,
    tenant_create,
    tenant_update,
    tenant_user_create,
)


class TenantOutput(serializers.ModelSerializer):
    class Meta:
        model = Tenant
        fields = ["id", "name", "status", "gpu_quota", "created_at"]


class TenantListCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=100)
        gpu_quota = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
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
        gpu_quota = serializers.IntegerField(min_value=0, required=False, allow_null=True)
        status = serializers.ChoiceField(choices=Tenant.Status.choices, required=False)

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
        body = {"id": user.id, "username": user.username, "token": token.key}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class ShareGroupOutput(serializers.ModelSerializer):
    tenants = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = ShareGroup
        fields = ["id", "name", "tenants", "created_at"]


class ShareGroupListCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=100)
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
        name = serializers.CharField(max_length=100)
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
