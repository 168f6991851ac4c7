"""The API of quota sharing (design §16.2): `PUT/GET /api/v1/tenants/{id}/quotas`, `/api/v1/cohorts` (admin)."""

from decimal import ROUND_HALF_UP

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import GPU_QUOTA_MAX, NameField
from nodes.gpu_type_input import GpuTypeField
from scheduling.fair_share.selectors import tenant_sharing
from scheduling.fair_share.services import (
    QuotaLine,
    cohort_create,
    cohort_delete,
    cohort_update,
    tenant_quotas_replace,
)
from tenants.models import Cohort, Tenant


@extend_schema_field({"type": "number", "minimum": 0, "maximum": GPU_QUOTA_MAX})
class CardsField(serializers.DecimalField):
    """Cards: a JSON number from 0 to the `gpu_quota` bound (design §15.8), kept to hundredths, rounded half up (a
    schema cannot say "two decimals" of a binary number, so more are not refused)."""

    def __init__(self, **kwargs):
        super().__init__(max_digits=9, decimal_places=2, min_value=0, max_value=GPU_QUOTA_MAX, rounding=ROUND_HALF_UP,
                         **kwargs)

    def validate_precision(self, value):
        # Bounds before rounding: beyond them, rounding to hundredths would overflow the nine digits.
        if value < self.min_value:
            self.fail("min_value", min_value=self.min_value)
        if value > self.max_value:
            self.fail("max_value", max_value=self.max_value)
        return value


class QuotaLineInput(StrictSerializer):
    gpu_type = GpuTypeField()
    nominal = CardsField()
    borrowing_limit = CardsField(required=False, allow_null=True, default=None)
    lending_limit = CardsField(required=False, allow_null=True, default=None)


class QuotaLineOutput(serializers.Serializer):
    gpu_type = serializers.CharField()
    nominal = serializers.DecimalField(max_digits=9, decimal_places=2, allow_null=True,
                                       help_text="null: no row for this type (the tenant may only borrow it)")
    borrowing_limit = serializers.DecimalField(max_digits=9, decimal_places=2, allow_null=True)
    lending_limit = serializers.DecimalField(max_digits=9, decimal_places=2, allow_null=True)
    used = serializers.DecimalField(max_digits=9, decimal_places=2)
    borrowed = serializers.DecimalField(max_digits=9, decimal_places=2)
    lent = serializers.DecimalField(max_digits=9, decimal_places=2)


class TenantQuotasApi(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(responses=QuotaLineOutput(many=True))
    def get(self, request, tenant_id: int):
        tenant = get_object_or_404(Tenant, id=tenant_id)
        return Response(QuotaLineOutput(tenant_sharing(tenant.id), many=True).data)

    @extend_schema(request=QuotaLineInput(many=True), responses=QuotaLineOutput(many=True))
    def put(self, request, tenant_id: int):
        tenant = get_object_or_404(Tenant, id=tenant_id)
        payload = QuotaLineInput(data=request.data, many=True)
        payload.is_valid(raise_exception=True)
        tenant_quotas_replace(tenant_id=tenant.id, lines=[QuotaLine(**line) for line in payload.validated_data],
                              actor=request.user)
        return Response(QuotaLineOutput(tenant_sharing(tenant.id), many=True).data)


class CohortOutput(serializers.ModelSerializer):
    tenants = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Cohort
        fields = ["id", "name", "tenants", "created_at"]


class CohortListCreateApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = NameField()
        tenants = serializers.PrimaryKeyRelatedField(many=True, queryset=Tenant.objects.all())

    @extend_schema(responses=CohortOutput(many=True))
    def get(self, request):
        return Response(CohortOutput(Cohort.objects.prefetch_related("tenants"), many=True).data)

    @extend_schema(request=InputSerializer, responses={201: CohortOutput})
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        cohort = cohort_create(actor=request.user, **payload.validated_data)
        return Response(CohortOutput(cohort).data, status=status.HTTP_201_CREATED)


class CohortDetailApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        name = NameField(required=False)
        tenants = serializers.PrimaryKeyRelatedField(many=True, queryset=Tenant.objects.all(), required=False)

    @extend_schema(responses=CohortOutput)
    def get(self, request, cohort_id: int):
        return Response(CohortOutput(get_object_or_404(Cohort, id=cohort_id)).data)

    @extend_schema(request=InputSerializer, responses=CohortOutput)
    def patch(self, request, cohort_id: int):
        get_object_or_404(Cohort, id=cohort_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        cohort = cohort_update(cohort_id=cohort_id, actor=request.user, **payload.validated_data)
        return Response(CohortOutput(cohort).data)

    @extend_schema(responses={204: None})
    def delete(self, request, cohort_id: int):
        get_object_or_404(Cohort, id=cohort_id)
        cohort_delete(cohort_id=cohort_id, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
