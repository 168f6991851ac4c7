"""Adding a node (staff): the agent's command line with the cluster's join token, and the nodes awaiting approval."""

from django.conf import settings
from django.shortcuts import get_object_or_404

from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from nodes.models import Node
from nodes.selectors import with_approval_state
from nodes.services import node_approve

JOIN_TOKEN_PATH = "/etc/heteroflow/join-token"
NODE_TOKEN_PATH = "/var/lib/heteroflow/node-token"


@staff_required
def node_add(request):
    approved = None
    if request.method == "POST":
        number = positive_int_or_none(request.POST.get("node", ""))
        node = get_object_or_404(with_approval_state(Node.objects.all()), id=number, awaiting_approval=True)
        approved = node_approve(node=node, actor=request.user)
    join_token = settings.HETEROFLOW_JOIN_TOKEN
    context = {
        "joining": len(join_token) >= settings.MIN_JOIN_TOKEN_LENGTH,
        "join_token": join_token,
        "auto_approve": settings.HETEROFLOW_JOIN_AUTO_APPROVE,
        "server": request.build_absolute_uri("/").rstrip("/"),
        "join_token_path": JOIN_TOKEN_PATH,
        "node_token_path": NODE_TOKEN_PATH,
        "awaiting": with_approval_state(Node.objects.all()).filter(awaiting_approval=True).order_by("name"),
        "approved": approved,
    }
    return render_page(request, "nodes/node_add.html", context, fragment="approval-queue")
