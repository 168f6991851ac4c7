from django.urls import path

from nodes import apis

urlpatterns = [
    path("agent/register", apis.AgentRegisterApi.as_view(), name="api-agent-register"),
    path("agent/heartbeat", apis.AgentHeartbeatApi.as_view(), name="api-agent-heartbeat"),
    path("nodes", apis.NodeListApi.as_view(), name="api-nodes"),
    path("nodes/<int:node_id>", apis.NodeDetailApi.as_view(), name="api-node-detail"),
    path("nodes/<int:node_id>/topology", apis.NodeTopologyApi.as_view(), name="api-node-topology"),
]
