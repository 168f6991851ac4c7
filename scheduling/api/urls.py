from django.urls import path

from nodes import apis as node_apis
from scheduling.api import (
    agent_apis,
    group_apis,
    log_apis,
    node_maintenance_apis,
    preemption_plan_apis,
    scheduler_apis,
    task_apis,
    template_apis,
    tenant_loop_apis,
)
from scheduling.fair_share import apis as fair_share_apis
from scheduling.hardware.drain import drain_progress
from scheduling.selectors import node_card_holders
from scheduling.usage import apis as usage_apis

urlpatterns = [
    path("agent/register", agent_apis.AgentRegisterApi.as_view(), name="api-agent-register"),
    path("agent/heartbeat", agent_apis.AgentHeartbeatApi.as_view(), name="api-agent-heartbeat"),
    path("agent/work", agent_apis.AgentWorkApi.as_view(), name="api-agent-work"),
    path("agent/tasks/<int:task_id>/status", agent_apis.AgentTaskStatusApi.as_view(), name="api-agent-task-status"),
    path("agent/tasks/<int:task_id>/logs", log_apis.AgentTaskLogApi.as_view(), name="api-agent-task-logs"),
    path("tasks/<int:task_id>/logs", log_apis.TaskLogApi.as_view(), name="api-task-logs"),
    path("tasks/<int:task_id>/events", tenant_loop_apis.TaskEventsApi.as_view(), name="api-task-events"),
    path("quota", tenant_loop_apis.QuotaApi.as_view(), name="api-quota"),
    path("tasks", task_apis.TaskListCreateApi.as_view(), name="api-tasks"),
    path("tasks/<int:task_id>", task_apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<int:task_id>/stop", task_apis.TaskStopApi.as_view(), name="api-task-stop"),
    path("tasks/<int:task_id>/resubmit", task_apis.TaskResubmitApi.as_view(), name="api-task-resubmit"),
    path("task-templates", template_apis.TaskTemplateListCreateApi.as_view(), name="api-task-templates"),
    path("task-templates/<int:template_id>", template_apis.TaskTemplateDetailApi.as_view(),
         name="api-task-template-detail"),
    path("tasks/<int:task_id>/preemption-plan", preemption_plan_apis.PreemptionPlanApi.as_view(),
         name="api-task-preemption-plan"),
    path("scheduler/cycles", scheduler_apis.SchedulerCycleApi.as_view(), name="api-scheduler-cycles"),
    path("scheduler/defrag-plan", scheduler_apis.DefragPlanApi.as_view(), name="api-scheduler-defrag-plan"),
    path("task-groups", group_apis.TaskGroupListCreateApi.as_view(), name="api-task-groups"),
    path("task-groups/<int:group_id>", group_apis.TaskGroupDetailApi.as_view(), name="api-task-group-detail"),
    path("task-groups/<int:group_id>/stop", group_apis.TaskGroupStopApi.as_view(), name="api-task-group-stop"),
    path("task-groups/<int:group_id>/endpoints", group_apis.TaskGroupEndpointsApi.as_view(),
         name="api-task-group-endpoints"),
    path("task-groups/<int:group_id>/revisions", group_apis.TaskGroupRevisionsApi.as_view(),
         name="api-task-group-revisions"),
    # The node's detail is the nodes app's; the tasks holding its cards are this app's to say.
    path("nodes/<int:node_id>", node_apis.NodeDetailApi.as_view(card_holders=node_card_holders,
                                                                drain_reader=drain_progress),
         name="api-node-detail"),
    path("nodes/<int:node_id>/drain", node_maintenance_apis.NodeDrainApi.as_view(), name="api-node-drain"),
    path("nodes/<int:node_id>/uncordon", node_maintenance_apis.NodeUncordonApi.as_view(), name="api-node-uncordon"),
    path("nodes/<int:node_id>/topology", node_apis.NodeTopologyApi.as_view(card_holders=node_card_holders,
                                                                          drain_reader=drain_progress),
         name="api-node-topology"),
    path("tenants/<int:tenant_id>/quotas", fair_share_apis.TenantQuotasApi.as_view(), name="api-tenant-quotas"),
    path("cohorts", fair_share_apis.CohortListCreateApi.as_view(), name="api-cohorts"),
    path("cohorts/<int:cohort_id>", fair_share_apis.CohortDetailApi.as_view(), name="api-cohort"),
    path("usage", usage_apis.UsageApi.as_view(), name="api-usage"),
]
