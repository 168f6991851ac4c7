from django.urls import path

from scheduling.web.consumers import DiagnosticsConsumer, TaskStatusConsumer
from scheduling.web.log_views import TaskLogConsumer

websocket_urlpatterns = [
    path("ws/diagnostics/", DiagnosticsConsumer.as_asgi()),
    path("ws/tasks/", TaskStatusConsumer.as_asgi()),
    path("ws/tasks/<int:task_id>/logs/", TaskLogConsumer.as_asgi()),
]
