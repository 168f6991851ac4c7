from django.urls import path

from scheduling.api import agent_apis, group_apis, preemption_plan_apis, scheduler_apis, task_apis

urlpatterns = [
    path("agent/work", agent_apis.AgentWorkApi.as_view(), name="api-agent-work"),
    path("agent/tasks/<int:task_id>/status", agent_apis.AgentTaskStatusApi.as_view(), name="api-agent-task-status"),
    path("tasks", task_apis.TaskListCreateApi.as_view(), name="api-tasks"),
    path("tasks/<int:task_id>", task_apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<int:task_id>/stop", task_apis.TaskStopApi.as_view(), name="api-task-stop"),
    path("tasks/<int:task_id>/preemption-plan", preemption_plan_apis.PreemptionPlanApi.as_view(),
         name="api-task-preemption-plan"),
    path("scheduler/cycles", scheduler_apis.SchedulerCycleApi.as_view(), name="api-scheduler-cycles"),
    path("task-groups", group_apis.TaskGroupListCreateApi.as_view(), name="api-task-groups"),
    path("task-groups/<int:group_id>", group_apis.TaskGroupDetailApi.as_view(), name="api-task-group-detail"),
]
