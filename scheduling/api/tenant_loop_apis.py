"""What a tenant's client reads besides its tasks (design §16.4): a task's timeline and the caller's quota."""

from django.db.models import Count
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.errors import NotAllowed
from heteroflow_site.permissions import is_admin
from scheduling.models import Task, TaskEvent, TaskStatus
from scheduling.fair_share.quotas import tenant_gpu_usage
from scheduling.fair_share.selectors import tenant_overview
from scheduling.selectors import tasks_visible_to
from tenants.models import Tenant
from tenants.selectors import tenant_of


class TaskEventOutput(serializers.ModelSerializer):
    # "from" is a Python keyword: the field is added under that name in get_fields.
    to = serializers.CharField(source="to_status")

    class Meta:
        model = TaskEvent
        fields = ["to", "reason", "at"]

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.CharField(source="from_status")
        return fields


class TaskEventsApi(APIView):
    @extend_schema(responses=TaskEventOutput(many=True))
    def get(self, request, task_id: int):
        """The task's timeline, oldest first: one entry per state change (another tenant's task is a 404)."""
        if not tasks_visible_to(request.user).filter(id=task_id).exists():
            raise exceptions.NotFound(f"no task {task_id}")
        return Response(TaskEventOutput(TaskEvent.objects.filter(task_id=task_id), many=True).data)


class QuotaTypeOutput(serializers.Serializer):
    gpu_type = serializers.CharField()
    used = serializers.DecimalField(max_digits=9, decimal_places=2, coerce_to_string=False)
    nominal = serializers.DecimalField(max_digits=9, decimal_places=2, coerce_to_string=False, allow_null=True,
                                       help_text="guaranteed cards of the type; null: no row, it may only borrow")
    borrowed = serializers.DecimalField(max_digits=9, decimal_places=2, coerce_to_string=False,
                                        help_text="what its tasks admitted by borrowing hold")


class QuotaOutput(serializers.Serializer):
    tenant = serializers.CharField()
    gpu_quota = serializers.IntegerField(allow_null=True, help_text="GPUs at most, over every type; null: unlimited")
    gpu_used = serializers.DecimalField(
        max_digits=9, decimal_places=2, coerce_to_string=False,
        help_text="GPUs the tenant's active tasks hold, a fractional task as its share of its card (design §16.2)")
    tasks = serializers.DictField(child=serializers.IntegerField(), help_text="the tenant's tasks by status")
    types = QuotaTypeOutput(many=True, help_text="per GPU type the cluster has, or the tenant has a quota row for or "
                                                 "uses (design §16.2)")


class QuotaApi(APIView):
    @extend_schema(parameters=[OpenApiParameter("tenant", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                                                description="admins: whose quota (tenant users read their own)")],
                   responses=QuotaOutput)
    def get(self, request):
        """The caller's tenant: its GPU quota, what it uses and its tasks by status."""
        tenant = _quota_tenant(request)
        by_status = dict(Task.objects.filter(tenant=tenant).values_list("status").annotate(count=Count("id"))
                         .order_by())
        body = {"tenant": tenant.name, "gpu_quota": tenant.gpu_quota,
                "gpu_used": tenant_gpu_usage([tenant.id]).get(tenant.id, 0),
                "tasks": {status: by_status.get(status, 0) for status in TaskStatus.values},
                "types": tenant_overview(tenant.id)}
        return Response(QuotaOutput(body).data)


def _quota_tenant(request) -> Tenant:
    if not is_admin(request.user):
        tenant = tenant_of(request.user)
        if tenant is None:
            raise exceptions.NotFound("you belong to no tenant")
        return tenant
    field = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    raw = request.query_params.get("tenant")
    if raw is None:
        # Optional in the schema (a tenant's user asks about its own): for an admin a rule, not the schema, wants it.
        raise NotAllowed("an admin names the tenant: ?tenant=ID", field="tenant")
    try:
        tenant_id = field.run_validation(raw)
    except exceptions.ValidationError as error:
        raise exceptions.ValidationError({"tenant": error.detail}) from None
    tenant = Tenant.objects.filter(id=tenant_id).first()
    if tenant is None:
        raise exceptions.NotFound(f"no tenant {tenant_id}")
    return tenant
