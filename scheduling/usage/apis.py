"""`GET /api/v1/usage?from=&to=&group_by=` (design §17.4): card-seconds per tenant, GPU type, task type and day,
JSON or `text/csv` (`Accept: text/csv` or `?format=csv`). A tenant reads its own; an admin all."""

import csv
import io
from datetime import timedelta

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.renderers import ORJSONRenderer
from scheduling.usage.selectors import GROUP_KEYS, MAX_RANGE_DAYS, UsageQuery, default_range, usage_rows

GROUP_BY_PATTERN = rf"^({'|'.join(GROUP_KEYS)})(,({'|'.join(GROUP_KEYS)}))*$"
DEFAULT_GROUP_BY = "tenant,gpu_type,day"


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        """The rows under a header line, which an empty answer has too (the view's `columns`)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=renderer_context["view"].columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(data)
        return out.getvalue().encode(self.charset)


def _group_by(value: str) -> tuple[str, ...]:
    keys = tuple(key.strip() for key in value.split(",") if key.strip())
    unknown = [key for key in keys if key not in GROUP_KEYS]
    if not keys or unknown:
        raise serializers.ValidationError(
            f"unknown grouping {', '.join(unknown) or repr(value)}: group by any of {', '.join(GROUP_KEYS)}")
    return tuple(dict.fromkeys(keys))


class UsageQueryInput(serializers.Serializer):
    """`from` and `to` are inclusive UTC days; `from` after `to`, or more than MAX_RANGE_DAYS days, names the
    parameter at fault."""

    to = serializers.DateField(required=False)
    group_by = serializers.CharField(required=False, default=DEFAULT_GROUP_BY, max_length=200)

    def get_fields(self):
        # `from` is a Python keyword: declared here, under the name the query string uses.
        fields = super().get_fields()
        fields["from"] = serializers.DateField(required=False)
        return fields

    def validate_group_by(self, value: str) -> tuple[str, ...]:
        return _group_by(value)

    def validate(self, attrs):
        day_from, day_to = attrs.get("from"), attrs.get("to")
        if day_from is None:
            day_from, default_to = default_range(day_to or timezone.now().date())
            day_to = day_to or default_to
        elif day_to is None:
            # Through today, as far as the longest range reaches.
            day_to = min(max(timezone.now().date(), day_from), day_from + timedelta(days=MAX_RANGE_DAYS - 1))
        if day_from > day_to:
            raise serializers.ValidationError({"from": [f"from ({day_from}) is after to ({day_to})"]})
        if (day_to - day_from).days + 1 > MAX_RANGE_DAYS:
            raise serializers.ValidationError(
                {"from": [f"the range from {day_from} to {day_to} is over {MAX_RANGE_DAYS} days"]})
        return UsageQuery(day_from=day_from, day_to=day_to, group_by=attrs["group_by"])


class UsageRowOutput(serializers.Serializer):
    tenant = serializers.CharField(required=False, help_text="when grouped by tenant")
    gpu_type = serializers.CharField(required=False, help_text="when grouped by gpu_type")
    task_type = serializers.CharField(required=False, help_text="when grouped by task_type")
    day = serializers.DateField(required=False, help_text="when grouped by day (UTC)")
    card_seconds = serializers.FloatField()
    card_hours = serializers.FloatField()


USAGE_PARAMETERS = [
    OpenApiParameter("from", OpenApiTypes.DATE, description="first UTC day (default: 29 days before `to`)"),
    OpenApiParameter("to", OpenApiTypes.DATE, description=f"last UTC day, at most {MAX_RANGE_DAYS - 1} days after "
                                                          "`from` (default: today, within that range)"),
    OpenApiParameter("group_by", {"type": "string", "pattern": GROUP_BY_PATTERN, "maxLength": 200},
                     description=f"comma-separated, any of {', '.join(GROUP_KEYS)} (default {DEFAULT_GROUP_BY})"),
]


def read_usage_query(request) -> UsageQuery:
    names = ("from", "to", "group_by")
    query = UsageQueryInput(data={name: request.query_params[name] for name in names if name in request.query_params})
    query.is_valid(raise_exception=True)
    return query.validated_data


class UsageApi(APIView):
    renderer_classes = [ORJSONRenderer, CsvRenderer]
    columns: list[str] = []

    @extend_schema(parameters=USAGE_PARAMETERS,
                   responses={(200, "application/json"): UsageRowOutput(many=True),
                              (200, "text/csv"): OpenApiTypes.STR})
    def get(self, request):
        """Card-seconds used over a range of days, grouped as asked; a tenant's own only, every tenant's for an
        admin."""
        query = read_usage_query(request)
        self.columns = [*query.group_by, "card_seconds", "card_hours"]
        return Response(usage_rows(user=request.user, query=query))

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400:
            # Errors keep the API's JSON error body (design §14), whatever the client asked for.
            response.accepted_renderer, response.accepted_media_type = ORJSONRenderer(), ORJSONRenderer.media_type
        return response
