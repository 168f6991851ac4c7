"""The plugin-change preview: the head of the queue under the current and the proposed plugin set."""

import pytest

from heteroflow_site.errors import DomainError
from plugins_admin.rules import PluginChangeRequest
from plugins_admin.what_if import plugin_change_preview
from scheduling.framework import reasons
from scheduling.models import PluginConfig, Task, TaskGroup
from scheduling.what_if.plugin_sets import plugin_set_preview
from tests.factories import make_node, make_task

ENABLE_BINPACK = [PluginChangeRequest("binpack", enabled=True)]


def _two_empty_nodes_and_six_one_card_tasks(tenant):
    nodes = [make_node(cards=8, name=name) for name in ("node-a", "node-b")]
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(6)]
    return nodes, tasks


def _used(side: dict) -> dict[str, int]:
    return {entry["node"]: entry["gpu_used"] for entry in side["allocation"]["nodes"]}


def _layout(side: dict) -> set[str]:
    return {scorer["name"] for scorer in side["plugins"]["scorers"]} & {"spread", "binpack"}


def test_an_unchanged_plugin_set_moves_nothing(tenant):
    _two_empty_nodes_and_six_one_card_tasks(tenant)

    preview = plugin_change_preview(requests=[])

    assert preview["considered"] == 6
    assert preview["moved"] == [] and preview["newly_placed"] == [] and preview["newly_unplaced"] == []
    assert preview["current"]["placements"] == preview["proposed"]["placements"]
    assert preview["current"]["placed"] == 6


def test_spread_to_binpack_packs_three_plus_three_onto_one_node(tenant):
    _two_empty_nodes_and_six_one_card_tasks(tenant)

    preview = plugin_change_preview(requests=ENABLE_BINPACK)

    assert _layout(preview["current"]) == {"spread"}
    assert _layout(preview["proposed"]) == {"binpack"}
    assert sorted(_used(preview["current"]).values()) == [3, 3]
    assert sorted(_used(preview["proposed"]).values()) == [0, 6]
    full = next(name for name, used in _used(preview["proposed"]).items() if used == 6)
    assert len(preview["moved"]) == 3
    assert all(move["to_node"] == full and move["from_node"] != full for move in preview["moved"])
    assert preview["current"]["allocation"]["gpu_used"] == preview["proposed"]["allocation"]["gpu_used"] == 6
    # Packed, one node stays whole for an 8-card task; spread, neither does.
    assert preview["fragmentation"]["current"]["usable"][8] == 0
    assert preview["fragmentation"]["proposed"]["usable"][8] == 8


def test_a_task_only_the_proposal_can_place_is_newly_placed(tenant):
    make_node(cards=8, name="node-a")
    make_node(cards=8, name="node-b")
    small = [make_task(tenant=tenant, gpu_required=4, priority=90) for _ in range(2)]
    big = make_task(tenant=tenant, gpu_required=8, priority=10)

    preview = plugin_change_preview(requests=ENABLE_BINPACK)

    # Spread puts one 4-card task on each node, leaving no room for the 8-card task; binpack keeps a node whole.
    assert preview["newly_placed"] == [big.id]
    assert preview["newly_unplaced"] == []
    assert {entry["task"] for entry in preview["current"]["placements"]} == {task.id for task in [*small, big]}


def test_the_preview_keeps_to_the_queue_order_and_the_cycle_limit(tenant):
    make_node(cards=8)
    late = make_task(tenant=tenant, gpu_required=1, priority=1)
    first = make_task(tenant=tenant, gpu_required=1, priority=99)

    preview = plugin_set_preview(change=lambda current: current, limit=1)

    assert [entry["task"] for entry in preview["current"]["placements"]] == [first.id]
    assert late.id not in {entry["task"] for entry in preview["proposed"]["placements"]}


def _gang(tenant, *, world_size: int, gpus_per_worker: int, priority: int = 50):
    gang = TaskGroup.objects.create(tenant=tenant, name=f"ddp-{world_size}x{gpus_per_worker}", type="training",
                                    world_size=world_size, gpus_per_worker=gpus_per_worker)
    members = [make_task(tenant=tenant, type="training", gpu_required=gpus_per_worker, group=gang, rank=rank,
                         priority=priority) for rank in range(world_size)]
    return gang, members


def test_a_training_gang_is_previewed_whole_at_its_place_in_the_queue(tenant):
    make_node(cards=8, name="node-a")
    make_node(cards=8, name="node-b")
    _, members = _gang(tenant, world_size=2, gpus_per_worker=4, priority=90)
    alone = make_task(tenant=tenant, gpu_required=1, priority=10)

    preview = plugin_change_preview(requests=ENABLE_BINPACK)

    assert (preview["considered"], preview["gangs"]) == (3, 1)
    placements = preview["current"]["placements"]
    assert [entry["task"] for entry in placements] == [*(member.id for member in members), alone.id]
    assert all(entry["code"] == "Scheduled" and len(entry["cards"]) == 4 for entry in placements[:2])
    assert preview["current"]["allocation"]["gpu_used"] == 9


def test_a_gang_that_does_not_fit_whole_places_no_member_and_its_cards_stay_free(tenant):
    make_node(cards=8, name="node-a")
    _, members = _gang(tenant, world_size=3, gpus_per_worker=4, priority=90)
    alone = make_task(tenant=tenant, gpu_required=8, priority=10)

    preview = plugin_change_preview(requests=[])

    by_task = {entry["task"]: entry for entry in preview["current"]["placements"]}
    assert [by_task[member.id]["node"] for member in members] == [None, None, None]
    assert by_task[alone.id]["node"] == "node-a"


def test_the_preview_names_the_bind_plugins_it_does_not_preview(tenant, settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.gatekeeper.factory"]
    make_node(cards=8)
    make_task(tenant=tenant, gpu_required=1)

    preview = plugin_change_preview(requests=[])

    assert preview["not_previewed"][0] == "Bind plugin gatekeeper"
    assert "preemption (PostFilter)" in preview["not_previewed"]


@pytest.mark.parametrize(("requests", "field"), [
    ([PluginChangeRequest("no-such-plugin", enabled=True)], "[0].name"),
    ([PluginChangeRequest("binpack", enabled=True), PluginChangeRequest("gpu-filter", enabled=False)],
     "[1].enabled"),
    ([PluginChangeRequest("preempt", weight=3)], "[0].weight"),
    ([PluginChangeRequest("spread", weight=0)], "[0].weight"),
    ([PluginChangeRequest("preempt", extra={"preempt_stage": "sometimes"})], "[0].extra.preempt_stage"),
])
def test_a_change_saving_would_refuse_is_refused_naming_the_field(tenant, requests, field):
    with pytest.raises(DomainError) as refused:
        plugin_change_preview(requests=requests)

    assert refused.value.field == field


def test_the_preview_saves_nothing(tenant):
    _two_empty_nodes_and_six_one_card_tasks(tenant)
    before = list(PluginConfig.objects.order_by("name").values_list("name", "enabled", "weight", "extra"))

    plugin_change_preview(requests=ENABLE_BINPACK)

    assert list(PluginConfig.objects.order_by("name").values_list("name", "enabled", "weight", "extra")) == before
    assert set(Task.objects.values_list("status", flat=True)) == {"pending"}


def test_the_preview_holds_an_inactive_tenants_tasks_as_the_cycle_does(tenant, other_tenant):
    """The preview's snapshot is set up as the cycle's (quota book and inactive tenants): a task the cycle holds is
    not shown as placed."""
    make_node(cards=8, name="node-a")
    held = make_task(tenant=other_tenant, gpu_required=1)
    placed = make_task(tenant=tenant, gpu_required=1)
    other_tenant.status = other_tenant.Status.INACTIVE
    other_tenant.save(update_fields=["status"])

    preview = plugin_change_preview(requests=[])

    codes = {entry["task"]: entry["code"] for entry in preview["current"]["placements"]}
    assert codes == {held.id: reasons.TENANT_INACTIVE, placed.id: reasons.SCHEDULED}
