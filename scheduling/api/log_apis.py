"""Task output (design §16.4): node agents append it, tenants read it as plain text."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiRequest, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.renderers import ORJSONRenderer
from nodes.authentication import AgentApi
from scheduling.services.log_reading import task_log_slice
from scheduling.selectors import tasks_visible_to
from scheduling.services.task_logs import LOG_BATCH_MAX_BYTES, NotPlacedOnThisNode, task_log_append

TAIL_MAX_LINES = 100_000
OFFSET_HEADER = "X-Log-Offset"
DROPPED_HEADER = "X-Log-Dropped"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


class AgentTaskLogApi(AgentApi):
    """The agent's batches of a task's output: the raw bytes as the body (any content type), appended."""

    # The body is read raw, bounded, below: no parser may read it first.
    parser_classes = []

    @extend_schema(
        request=OpenApiRequest(OpenApiTypes.BINARY),
        responses={200: inline_serializer("AgentLogAppended", {"offset": serializers.IntegerField()}),
                   413: OpenApiResponse(description=f"a batch over {LOG_BATCH_MAX_BYTES} bytes")})
    def post(self, request, task_id: int):
        data = request.stream.read(LOG_BATCH_MAX_BYTES + 1) if request.stream is not None else b""
        if len(data) > LOG_BATCH_MAX_BYTES:
            raise PayloadTooLarge(f"a log batch may hold at most {LOG_BATCH_MAX_BYTES} bytes; send smaller batches")
        if not data:
            raise exceptions.ValidationError({"body": ["the batch is empty"]})
        try:
            appended = task_log_append(node=request.auth, task_id=task_id, data=data)
        except NotPlacedOnThisNode:
            raise exceptions.NotFound("no such task on this node")
        return Response({"offset": appended.end_offset})


class PlainTextRenderer(BaseRenderer):
    """Lets a client ask for `text/plain` (the log itself is a ready HttpResponse)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return str(data).encode(self.charset)


class TaskLogInput(serializers.Serializer):
    tail = serializers.IntegerField(min_value=1, max_value=TAIL_MAX_LINES, required=False)
    offset = serializers.IntegerField(min_value=0, max_value=2**62, required=False, default=0)


class TaskLogApi(APIView):
    renderer_classes = [ORJSONRenderer, PlainTextRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("tail", {"type": "integer", "minimum": 1, "maximum": TAIL_MAX_LINES},
                             description="only the last N lines"),
            OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": 2**62},
                             description=f"only output after this byte (the {OFFSET_HEADER} of an earlier answer): "
                                         "how a client follows a running task"),
            OpenApiParameter(OFFSET_HEADER, OpenApiTypes.INT, location=OpenApiParameter.HEADER, response=True,
                             description="the byte offset of the output's end; pass it as `offset` to read on"),
            OpenApiParameter(DROPPED_HEADER, OpenApiTypes.INT, location=OpenApiParameter.HEADER, response=True,
                             description="bytes of the oldest output no longer kept (the last 1 MiB is)"),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR})
    def get(self, request, task_id: int):
        """The kept output of the task (the last 1 MiB), as text; another tenant's task is a 404."""
        options = TaskLogInput(data={key: request.query_params[key] for key in TaskLogInput().fields
                                     if key in request.query_params})
        options.is_valid(raise_exception=True)
        if not tasks_visible_to(request.user).filter(id=task_id).exists():
            raise exceptions.NotFound(f"no task {task_id}")
        piece = task_log_slice(task_id=task_id, offset=options.validated_data["offset"],
                               tail_lines=options.validated_data.get("tail"))
        response = HttpResponse(piece.text, content_type="text/plain; charset=utf-8")
        response[OFFSET_HEADER] = str(piece.end_offset)
        response[DROPPED_HEADER] = str(piece.dropped_bytes)
        return response

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response):
            # Only errors are DRF responses here: they keep the API's JSON error body (design §14), whatever the
            # client asked for.
            response.accepted_renderer, response.accepted_media_type = ORJSONRenderer(), ORJSONRenderer.media_type
        return response
