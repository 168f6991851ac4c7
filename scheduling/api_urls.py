from django.urls import path

from scheduling import apis

urlpatterns = [
    path("tasks", apis.TaskListCreateApi.as_view(), name="api-tasks"),
    path("tasks/<int:task_id>", apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<int:task_id>/stop", apis.TaskStopApi.as_view(), name="api-task-stop"),
]
