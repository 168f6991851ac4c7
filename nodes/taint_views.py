"""The node page's taints form (design §16.3): one taint per line, validated as `PATCH /api/v1/nodes/{id}`'s
`taints`."""

import re

from rest_framework import serializers

from heteroflow_site.serializers import StrictSerializer, flat_errors, validated
from nodes.models import Node
from nodes.services import node_update
from heteroflow_site.validation import LABEL_VALUE_MAX_LENGTH
from nodes.taints import EFFECTS
from nodes.taint_input import parse_pool_lines, pool_lines, taints_field


class TaintsInput(StrictSerializer):
    taints = taints_field()


# What each field of a taint line is called where the admin types it, and what a refused one should be.
FIELD_WORDS = {
    "key": "the key (before '=') is missing or too long",
    "value": f"the value (after '=') is at most {LABEL_VALUE_MAX_LENGTH} printable characters",
    "effect": f"the effect (after ':') must be {' or '.join(EFFECTS)}",
}


def save_taints(request, node: Node) -> dict:
    text = request.POST.get("taints", "")
    try:
        changes = validated(TaintsInput, {"taints": parse_pool_lines(text, with_effect=True)})
    except serializers.ValidationError as refusal:
        return {"taints_error": "; ".join(_line_errors(text, refusal.detail)), "taints_text": text}
    node_update(node=node, taints=changes["taints"], actor=request.user)
    return {"saved": "taints"}


def _line_errors(text: str, detail) -> list[str]:
    """`taints[1].effect: "" is not a valid choice` as `line 2 (gpu=a100): the effect (after ':') must be …`."""
    lines = [line.strip() for line in text.replace(",", "\n").splitlines() if line.strip()]
    messages = []
    for path, texts in flat_errors(detail).items():
        match = re.fullmatch(r"taints\[(\d+)\]\.(\w+)", path)
        if match is None:
            messages.append(" ".join(texts).replace("Ensure this field has no more than", "at most")
                            .replace("elements", "taints"))
            continue
        index, field = int(match[1]), match[2]
        messages.append(f"line {index + 1} ({lines[index]}): {FIELD_WORDS.get(field, ' '.join(texts))}")
    return messages


def taints_text(node: Node) -> str:
    return pool_lines(node.taints)
