from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.pagination import PAGE_HEADERS, PAGE_PARAMETERS, LinkHeaderPagination
from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import ColumnIntegerField, NameField
from scheduling.api.task_input import TaskInput
from scheduling.models import TaskTemplate
from scheduling.selectors import templates_visible_to
from scheduling.services.task_submit import submitting_tenant
from scheduling.services.task_templates import task_template_create, task_template_delete


class TemplateFieldsInput(TaskInput):
    """A submission to start from: a task's fields, the name optional (given at submit). Who it is for and when it
    is due are said at submit, not kept."""

    name = NameField(required=False)
    tenant = None
    group = None
    deadline = None


def template_fields(validated: dict) -> dict:
    """The validated fields as stored: JSON-ready, unset optional ones left out (the submit's defaults apply)."""
    return {key: value for key, value in validated.items() if value is not None}


class TaskTemplateInput(StrictSerializer):
    name = NameField()
    fields = TemplateFieldsInput()
    tenant = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None,
                                help_text="admins: whose template")


class TaskTemplateOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    fields = serializers.JSONField(help_text="the task fields to submit with, as `POST /api/v1/tasks` takes them")

    class Meta:
        model = TaskTemplate
        fields = ["id", "tenant", "name", "fields", "created_at"]


class TaskTemplateListCreateApi(APIView):
    @extend_schema(parameters=[*PAGE_PARAMETERS, *PAGE_HEADERS], responses=TaskTemplateOutput(many=True))
    def get(self, request):
        """The tenant's templates by name (admins: every tenant's), a page at a time."""
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(templates_visible_to(request.user), request, view=self)
        return paginator.get_paginated_response(TaskTemplateOutput(page, many=True).data)

    @extend_schema(request=TaskTemplateInput, responses={201: TaskTemplateOutput})
    def post(self, request):
        payload = TaskTemplateInput(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        tenant = submitting_tenant(user=request.user, tenant_id=data["tenant"])
        template = task_template_create(tenant=tenant, name=data["name"], fields=template_fields(data["fields"]))
        return Response(TaskTemplateOutput(template).data, status=status.HTTP_201_CREATED)


class TaskTemplateDetailApi(APIView):
    @extend_schema(responses=TaskTemplateOutput)
    def get(self, request, template_id: int):
        return Response(TaskTemplateOutput(get_object_or_404(templates_visible_to(request.user),
                                                             id=template_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, template_id: int):
        task_template_delete(template=get_object_or_404(templates_visible_to(request.user), id=template_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
