from django.urls import path

from scheduling.web.consumers import DiagnosticsConsumer, TaskStatusConsumer

websocket_urlpatterns = [
    path("ws/diagnostics/", DiagnosticsConsumer.as_asgi()),
    path("ws/tasks/", TaskStatusConsumer.as_asgi()),
]
