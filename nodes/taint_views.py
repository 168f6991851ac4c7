"""The node page's taints form (design §16.3): one taint per line, validated as `PATCH /api/v1/nodes/{id}`'s
`taints`."""

from rest_framework import serializers

from heteroflow_site.serializers import StrictSerializer, flat_errors, validated
from nodes.models import Node
from nodes.services import node_update
from nodes.taint_input import parse_pool_lines, pool_lines, taints_field


class TaintsInput(StrictSerializer):
    taints = taints_field()


def save_taints(request, node: Node) -> dict:
    text = request.POST.get("taints", "")
    try:
        changes = validated(TaintsInput, {"taints": parse_pool_lines(text, with_effect=True)})
    except serializers.ValidationError as refusal:
        messages = [f"{path}: {' '.join(texts)}" for path, texts in flat_errors(refusal.detail).items()]
        return {"taints_error": "; ".join(messages), "taints_text": text}
    node_update(node=node, taints=changes["taints"], actor=request.user)
    return {"saved": "taints"}


def taints_text(node: Node) -> str:
    return pool_lines(node.taints)
