from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.errors import DomainError
from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import positive_int_or_none
from plugins_admin.notifications.delivery import CHANNEL_EVENTS
from plugins_admin.notifications.selectors import notification_channels
from plugins_admin.notifications.services import notification_channel_test, notification_channel_update
from plugins_admin.selectors import plugin_history, plugin_listing, scheduler_plugins
from plugins_admin.change_input import PLUGIN_ACTIONS, PluginSettingsInput
from plugins_admin.services import UnknownPlugin, plugin_set_enabled, plugin_update


class PluginOutput(serializers.Serializer):
    name = serializers.CharField()
    enabled = serializers.BooleanField()
    weight = serializers.IntegerField()
    extra = serializers.DictField()
    locked = serializers.BooleanField(help_text="always on: cannot be disabled")
    locked_reason = serializers.CharField()
    exclusive_with = serializers.ListField(child=serializers.CharField())
    kinds = serializers.ListField(child=serializers.CharField())
    scores = serializers.BooleanField(help_text="has a weight (a score plugin)")
    description = serializers.CharField()


class SchedulerPluginsOutput(serializers.Serializer):
    filters = serializers.ListField(child=serializers.CharField())
    scorers = serializers.ListField(child=serializers.DictField())
    preempt_stage = serializers.CharField()


def _plugin_entry(name: str) -> dict:
    return next(plugin for plugin in plugin_listing() if plugin["name"] == name)


class PluginListApi(APIView):
    @extend_schema(responses=PluginOutput(many=True))
    def get(self, request):
        return Response(PluginOutput(plugin_listing(), many=True).data)


class PluginDetailApi(APIView):
    permission_classes = [IsAdmin]

    InputSerializer = PluginSettingsInput

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("action", str, enum=list(PLUGIN_ACTIONS), required=True)],
        responses=PluginOutput,
    )
    def post(self, request, name: str):
        action = request.query_params.get("action")
        if action not in PLUGIN_ACTIONS:
            raise ValidationError({"action": [f"action must be one of {', '.join(PLUGIN_ACTIONS)}"]})
        try:
            plugin_set_enabled(name=name, enabled=PLUGIN_ACTIONS[action], actor=request.user)
        except UnknownPlugin:
            raise NotFound(f"no plugin named {name!r}") from None
        except DomainError as exc:
            # Over the API the switch is the `action` parameter.
            raise type(exc)(exc.message, field="action") from None
        return Response(PluginOutput(_plugin_entry(name)).data)

    @extend_schema(request=InputSerializer, responses=PluginOutput)
    def put(self, request, name: str):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if not payload.validated_data:
            raise ValidationError({"detail": "send weight and/or extra"})
        try:
            plugin_update(name=name, actor=request.user, **payload.validated_data)
        except UnknownPlugin:
            raise NotFound(f"no plugin named {name!r}") from None
        return Response(PluginOutput(_plugin_entry(name)).data)


class PluginHistoryApi(APIView):
    permission_classes = [IsAdmin]

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        plugin = serializers.CharField()
        actor = serializers.CharField(source="actor.username", default=None)
        before = serializers.DictField()
        after = serializers.DictField()
        at = serializers.DateTimeField()

    @extend_schema(parameters=[OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 500},
                                                description="how many changes, newest first (default 50)")],
                   responses=OutputSerializer(many=True))
    def get(self, request):
        limit = positive_int_or_none(request.query_params.get("limit", "50"))
        if limit is None or not 1 <= limit <= 500:
            raise ValidationError({"limit": ["limit must be a whole number from 1 to 500"]})
        return Response(self.OutputSerializer(plugin_history(limit=limit), many=True).data)


class SchedulerPluginsApi(APIView):
    @extend_schema(responses=SchedulerPluginsOutput)
    def get(self, request):
        return Response(scheduler_plugins())


class NotificationChannelOutput(serializers.Serializer):
    kind = serializers.CharField()
    enabled = serializers.BooleanField()
    target = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())


class NotificationChannelListApi(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(responses=NotificationChannelOutput(many=True))
    def get(self, request):
        return Response(NotificationChannelOutput(notification_channels(), many=True).data)


class NotificationChannelDetailApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        enabled = serializers.BooleanField()
        target = serializers.CharField(allow_blank=True, max_length=500)
        events = serializers.ListField(child=serializers.ChoiceField(choices=CHANNEL_EVENTS), required=False)

    @extend_schema(request=InputSerializer, responses=NotificationChannelOutput)
    def put(self, request, kind: str):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            channel = notification_channel_update(
                kind=kind, events=payload.validated_data.get("events", list(CHANNEL_EVENTS)), actor=request.user,
                enabled=payload.validated_data["enabled"], target=payload.validated_data["target"],
            )
        except UnknownPlugin:
            raise NotFound(f"no notification channel {kind!r}") from None
        return Response(NotificationChannelOutput(channel).data)


class NotificationChannelTestApi(APIView):
    permission_classes = [IsAdmin]

    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        detail = serializers.CharField()

    @extend_schema(request=None, responses=OutputSerializer)
    def post(self, request, kind: str):
        try:
            result = notification_channel_test(kind=kind)
        except UnknownPlugin:
            raise NotFound(f"no notification channel {kind!r}") from None
        return Response(self.OutputSerializer(result).data)
