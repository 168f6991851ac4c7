"""Node pages (staff): the filterable list and one node's cards, topology and admin settings."""

from collections import defaultdict
from decimal import Decimal
from urllib.parse import urlencode

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Case, F, Q, When
from django.shortcuts import get_object_or_404
from rest_framework import serializers

from heteroflow_site.errors import DomainError
from heteroflow_site.serializers import flat_errors
from heteroflow_site.validation import LabelsField, normalised_gpu_type, positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from nodes.card_health import card_release
from nodes.models import DRAIN_GRACE_MAX_SECONDS, GPU, GPU_TYPES, Node
from nodes.selectors import (
    CardHolders, NodeMaintenance, SharesReader, card_type_counts, no_card_holders, no_shares, node_detail,
    node_places, nodes_list, unhealthy_card_counts, with_approval_state,
)
from nodes.services import AGENT_LABEL_PREFIX, node_approve, node_topology_update, node_update
from nodes.taint_views import save_taints, taints_text
from tenants.models import Tenant

LIST_FILTERS = ("gpu_type", "status", "region", "zone", "rack")
# The list's orders; the first, the default, puts the nodes that need an admin (offline, cordoned) on top.
NODE_SORTS = {
    "attention": ("Needs attention first",
                  (Case(When(status=Node.Status.OFFLINE, then=0), When(schedulable=False, then=1), default=2), "name")),
    "name": ("Name", ("name",)),
    "free": ("Most free GPUs", (F("gpu_used") - F("gpu_total"), "name")),
    "busy": ("Most GPUs held", ("-gpu_used", "name")),
    "heartbeat": ("Oldest heartbeat", (F("last_heartbeat_at").asc(nulls_first=True), "name")),
}
DEFAULT_NODE_SORT = "attention"
# Nodes per page of the list: a cluster of thousands is read and drawn a page at a time.
NODE_PAGE_SIZE = 200
PLACEMENT_FIELDS = ("region", "zone", "rack")
PLACEMENT_MAX_LENGTH = Node._meta.get_field("region").max_length
NUMA_COLOURS = ("#6366f1", "#0ea5e9", "#10b981", "#f59e0b", "#ec4899", "#8b5cf6", "#14b8a6", "#f97316")

CARD_W, CARD_H, CARD_GAP, GROUP_PAD, GROUP_GAP, LABEL_H = 54, 38, 8, 10, 16, 18


def _percent(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole else 0


def _list_rows(nodes, shares_held: SharesReader) -> list[dict]:
    nodes = list(nodes)
    node_ids = [node.id for node in nodes]
    types_of = card_type_counts(node_ids)
    unhealthy_of = unhealthy_card_counts(node_ids)
    shares_of = shares_held(node_ids=node_ids)
    rows = []
    for node in nodes:
        held = _cards_held(node, shares_of)
        rows.append({
            "node": node,
            "card_types": types_of.get(node.id, []),
            "unhealthy": unhealthy_of.get(node.id),
            "cards_held": held,
            "gpu_percent": _percent(held, node.gpu_total),
            "cpu_percent": round(node.cpu_percent),
            "memory_percent": _percent(node.memory_used_mb, node.memory_gb * 1024),
        })
    return rows


@staff_required
def node_list(request, shares_held: SharesReader = no_shares):
    filters = {name: request.GET.get(name, "").strip() for name in LIST_FILTERS}
    error = None
    try:
        nodes = with_approval_state(nodes_list({name: value for name, value in filters.items() if value}))
    except DomainError as refusal:
        error, nodes = refusal, Node.objects.none()
    filters["q"] = request.GET.get("q", "").strip()
    if filters["q"]:
        nodes = nodes.filter(Q(name__icontains=filters["q"]) | Q(internal_ip__startswith=filters["q"])
                             | Q(public_ip__startswith=filters["q"]))
    filters["sort"] = request.GET.get("sort", "") if request.GET.get("sort", "") in NODE_SORTS else DEFAULT_NODE_SORT
    nodes = nodes.order_by(*NODE_SORTS[filters["sort"]][1])
    page = Paginator(nodes, NODE_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "rows": _list_rows(page.object_list, shares_held),
        "page": page,
        "page_query": urlencode({name: value for name, value in filters.items()
                                 if value and (name, value) != ("sort", DEFAULT_NODE_SORT)}),
        "filters": filters,
        "error": error,
        "gpu_types": GPU_TYPES,
        "sorts": [(key, label) for key, (label, _) in NODE_SORTS.items()],
        "statuses": Node.Status.values,
        **node_places(),
        "total": Node.objects.count(),
    }
    return render_page(request, "nodes/node_list.html", context, fragment="node-table")


def group_diagram(groups: list[tuple[str, list[str]]], colour_of: dict[str, str]) -> dict:
    """Boxes for cards inside one enclosure per group, laid out left to right; geometry for a script-free SVG."""
    x = 0
    drawn = []
    for label, cards in groups:
        width = 2 * GROUP_PAD + len(cards) * CARD_W + (len(cards) - 1) * CARD_GAP
        boxes = [{"card": card, "x": x + GROUP_PAD + i * (CARD_W + CARD_GAP), "colour": colour_of.get(card, "#94a3b8")}
                 for i, card in enumerate(cards)]
        drawn.append({"label": label, "x": x, "width": width, "cards": boxes})
        x += width + GROUP_GAP
    return {
        "groups": drawn,
        "width": max(x - GROUP_GAP, 1),
        "height": LABEL_H + 2 * GROUP_PAD + CARD_H,
        "card_w": CARD_W, "card_h": CARD_H, "card_y": LABEL_H + GROUP_PAD, "box_h": 2 * GROUP_PAD + CARD_H,
    }


def topology_drawings(detail: dict) -> dict:
    # On a mixed node each vendor numbers from 0: the NUMA drawing names cards by type and index there.
    mixed = len({card["type"] for card in detail["cards"]}) > 1
    numa_of = {(f"{card['type']} {card['index']}" if mixed else f"GPU{card['index']}"): card["numa"]
               for card in detail["cards"]}
    numa_ids = sorted({numa for numa in numa_of.values() if numa is not None})
    colour_of = {card: NUMA_COLOURS[numa_ids.index(numa) % len(NUMA_COLOURS)]
                 for card, numa in numa_of.items() if numa is not None}
    by_numa: dict = defaultdict(list)
    for card, numa in numa_of.items():
        by_numa[numa].append(card)
    numa_groups = [(f"NUMA {numa}" if numa is not None else "NUMA unknown", cards)
                   for numa, cards in sorted(by_numa.items(), key=lambda item: (item[0] is None, item[0] or 0))]
    topology = detail["topology"]
    nvlink = None
    if topology:
        nvidia = (lambda index: f"nvidia {index}") if mixed else (lambda index: f"GPU{index}")
        nvlink = group_diagram(
            [(f"domain {n} · {len(cards)} card{'s' if len(cards) != 1 else ''}", [nvidia(card) for card in cards])
             for n, cards in enumerate(topology["domains"], start=1)], colour_of)
    return {
        "nvlink": nvlink,
        "numa": group_diagram(numa_groups, colour_of) if numa_groups else None,
        "legend": [{"numa": numa, "colour": NUMA_COLOURS[i % len(NUMA_COLOURS)]} for i, numa in enumerate(numa_ids)],
    }


def _cards_held(node: Node, shares_of: dict[int, Decimal]) -> Decimal:
    """The cards the node's tasks hold: the ledger's whole cards (design §7), and its fractional tasks' shares of
    their cards (`SharesReader`), which the ledger leaves out: 3 tasks of a quarter card hold 0.75."""
    return node.gpu_used + shares_of.get(node.id, Decimal(0))


def _card_rows(detail: dict) -> list[dict]:
    hot = settings.SCHEDULER["load_thresholds"]["gpu_temperature_threshold"]
    return [{**card, "memory_percent": _percent(card["memory_used_mb"], card["memory_total_mb"]),
             "hot": card["temperature"] >= hot} for card in detail["cards"]]


def _split_labels(labels: dict) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(admin labels, agent labels): only the admin's are editable here."""
    admin, agent = [], []
    for key, value in sorted(labels.items()):
        (agent if key.startswith(AGENT_LABEL_PREFIX) else admin).append((key, value))
    return admin, agent


def _save_topology(request, node: Node) -> dict:
    values = {name: request.POST.get(name, "").strip() for name in PLACEMENT_FIELDS}
    errors = {name: f"at most {PLACEMENT_MAX_LENGTH} characters" for name, value in values.items()
              if len(value) > PLACEMENT_MAX_LENGTH}
    if not errors:
        node_topology_update(node=node, actor=request.user, **values)
    return {"topology_errors": errors, "topology_values": values, "saved": "topology" if not errors else None}


def _save_labels(request, node: Node) -> dict:
    """Validated as `PATCH /api/v1/nodes/{id}`'s `labels`, each refusal said beside its row."""
    pairs = [(key.strip(), value) for key, value in zip(request.POST.getlist("label_key"),
                                                         request.POST.getlist("label_value"))]
    pairs = [(key, value) for key, value in pairs if key or value]
    row_errors = [_label_row_error(key, pairs[:position]) for position, (key, _) in enumerate(pairs)]
    if not any(row_errors):
        try:
            LabelsField().run_validation(dict(pairs))
        except serializers.ValidationError as refusal:
            detail = refusal.detail if isinstance(refusal.detail, dict) else {}
            row_errors = [" ".join(str(text) for text in detail.get(key, [])) for key, _ in pairs]
            if not any(row_errors):
                return {"labels_error": " ".join(flat_errors(refusal.detail).get("detail", ["not valid"])),
                        "label_rows": pairs}
    if any(row_errors):
        return {"labels_error": "Not saved: correct the labels marked below.",
                "label_rows": pairs, "label_row_errors": row_errors}
    try:
        node_update(node=node, labels=dict(pairs), actor=request.user)
    except DomainError as refusal:
        return {"labels_error": refusal.message, "label_rows": pairs}
    return {"saved": "labels"}


def _label_row_error(key: str, before: list[tuple[str, str]]) -> str:
    if not key:
        return "a label needs a key"
    if any(key == earlier for earlier, _ in before):
        return f"the key {key} is already given above"
    return ""


def _save_settings(request, node: Node) -> dict:
    tenant_id = request.POST.get("dedicated_tenant", "")
    tenant = None
    if tenant_id:
        number = positive_int_or_none(tenant_id)
        tenant = Tenant.objects.filter(id=number).first() if number is not None else None
        if tenant is None:
            return {"settings_error": "That tenant no longer exists: reload the page and choose another."}
    node_update(node=node, schedulable=request.POST.get("schedulable") == "on", dedicated_tenant=tenant,
                actor=request.user)
    return {"saved": "settings"}


def _approve(request, node: Node) -> dict:
    node_approve(node=node, actor=request.user)
    return {"saved": "approval"}


def _release_card(request, node: Node) -> dict:
    index = positive_int_or_none(request.POST.get("card_index"))
    card_type = normalised_gpu_type(request.POST.get("card_type", ""))
    card = GPU.objects.filter(node=node, type=card_type, index=index).first() if index is not None else None
    if card is None:
        return {"release_error": "no such card on this node"}
    try:
        card_release(node=node, card=card, actor=request.user)
    except DomainError as refusal:
        return {"release_error": refusal.message}
    return {"saved": "release"}


FORMS = {"topology": (_save_topology, "topology-form"), "labels": (_save_labels, "labels-form"),
         "settings": (_save_settings, "settings-form"), "taints": (save_taints, "taints-form"),
         "approve": (_approve, "approval"), "release": (_release_card, "cards-table")}


def _drain(request, node: Node, maintenance: NodeMaintenance) -> dict:
    text = request.POST.get("grace_seconds", "").strip()
    grace = None
    if text:
        grace = positive_int_or_none(text)
        if grace is None or grace > DRAIN_GRACE_MAX_SECONDS:
            return {"drain_errors": {"grace_seconds": f"a whole number of seconds from 0 to {DRAIN_GRACE_MAX_SECONDS}"},
                    "grace_value": text}
    maintenance.drain(node=node, grace_seconds=grace, actor=request.user)
    return {"saved": "drain"}


def _uncordon(request, node: Node, maintenance: NodeMaintenance) -> dict:
    try:
        maintenance.uncordon(node=node, actor=request.user)
    except DomainError as refusal:
        return {"drain_errors": {"node": refusal.message}}
    return {"saved": "uncordon"}


MAINTENANCE_FORMS = {"drain": _drain, "uncordon": _uncordon}


@staff_required
def node_page(request, node_id: int, card_holders: CardHolders = no_card_holders,
              shares_held: SharesReader = no_shares, maintenance: NodeMaintenance | None = None):
    nodes = with_approval_state(Node.objects.select_related("dedicated_tenant"))
    node = get_object_or_404(nodes, id=node_id)
    outcome, fragment = {}, None
    form = request.POST.get("form") if request.method == "POST" else None
    if form in FORMS:
        save, fragment = FORMS[form]
        outcome = save(request, node)
        node = nodes.get(id=node_id)
    elif form in MAINTENANCE_FORMS and maintenance is not None:
        outcome, fragment = MAINTENANCE_FORMS[form](request, node, maintenance), "drain-panel"
        node = nodes.get(id=node_id)
    detail = node_detail(node, card_holders=card_holders,
                         **({"drain_reader": maintenance.progress} if maintenance else {}))
    admin_labels, agent_labels = _split_labels(node.labels)
    held = _cards_held(node, shares_held(node_ids=[node.id]))
    context = {
        "node": node,
        "detail": detail,
        "cards": _card_rows(detail),
        "drawings": topology_drawings(detail),
        "usage": {key: (round(100 * value) if value is not None else None) for key, value in detail["usage"].items()},
        "cards_held": held,
        "cards_held_percent": _percent(held, node.gpu_total),
        "label_rows": admin_labels or [("", "")],
        "label_row_errors": [],
        "agent_labels": agent_labels,
        "tenants": Tenant.objects.all(),
        "topology_values": {name: getattr(node, name) for name in PLACEMENT_FIELDS},
        "topology_errors": {},
        "taints_text": taints_text(node),
        "maintenance": maintenance is not None,
        "drain_errors": {},
        **outcome,
    }
    row_errors = context["label_row_errors"]
    context["label_rows"] = [(key, value, row_errors[position] if position < len(row_errors) else "")
                             for position, (key, value) in enumerate(context["label_rows"])]
    refused = any(key.endswith(("_errors", "_error")) and outcome[key] for key in outcome)
    return render_page(request, "nodes/node_detail.html", context, fragment=fragment,
                       status=400 if fragment and request.htmx and refused else 200)
