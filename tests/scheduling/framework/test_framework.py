import random
from collections import Counter

import pytest

from nodes.agent.topology import TOPOLOGY_LABEL, encode_label, parse_nvidia_smi_topo
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import apply_bind, apply_release
from scheduling.framework.registry import PluginSetting, build_plugin_set
from scheduling.framework.reserve import default_cards
from scheduling.framework.snapshot import SchedulerConfig, TenancyView
from scheduling.framework.status import Code, Status
from scheduling.plugins import default_registry, gpu_filter, resource_filter
from scheduling.plugins.affinity import ZONE_MISMATCH
from scheduling.plugins.availability import NODE_OFFLINE
from scheduling.plugins.resource_prefilter import INFERENCE_LIMIT, INSUFFICIENT_GPU
from scheduling.plugins.tenant import DEDICATED_OTHER_TENANT
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_task, occupy
from tests.shared_data import TOPOLOGY_CAPTURES

CAPTURES = TOPOLOGY_CAPTURES


def framework(*settings, extra_plugins=()):
    return Framework(build_plugin_set(settings, default_registry(extra_plugins=list(extra_plugins))), CONFIG)


def run(framework_, snapshot, *tasks, seed=0):
    rng = random.Random(seed)
    placed = []
    for task in tasks:
        result = framework_.schedule(task, snapshot, rng)
        assert result.node is not None, result.message
        apply_bind(snapshot, task, result.node, framework_.reserve(task, result.node, snapshot.tenancy))
        placed.append(result.node.name)
    return Counter(placed)


def test_six_one_card_tasks_spread_three_and_three():
    snapshot = make_snapshot(make_node(name="a"), make_node(name="b"))
    assert run(framework(), snapshot, *[make_task(gpu_required=1) for _ in range(6)]) == {"a": 3, "b": 3}
    assert [node.gpu_used for node in snapshot.nodes] == [3, 3]


def test_six_one_card_tasks_binpack_onto_one_node():
    binpack = framework(PluginSetting("spread", False), PluginSetting("binpack", True, 1))
    snapshot = make_snapshot(make_node(name="a"), make_node(name="b"))
    assert sorted(run(binpack, snapshot, *[make_task(gpu_required=1) for _ in range(6)]).values()) == [6]


def test_spec_walk_through():
    tenant, other = 1, 2
    overloaded = make_node(name="hot")
    for card in overloaded.cards:
        card.memory_used_mb = 80000
    snapshot = make_snapshot(
        make_node(name="offline", status="offline"),
        make_node(name="dedicated", dedicated_tenant_id=other),
        overloaded,
        make_node(name="ascend", gpu_type="ascend", model="910B"),
        make_node(name="free"),
    )
    task = make_task(tenant_id=tenant, gpu_type="nvidia", gpu_required=4)
    result = framework().schedule(task, snapshot, random.Random(1))
    assert result.node.name == "free" and result.code is None
    assert framework().reserve(task, result.node) == [0, 1, 2, 3]
    diagnostics = result.compact_diagnostics()
    assert {name: reason for reason, names in diagnostics["filtered"].items() for name in names} == {
        "offline": NODE_OFFLINE, "dedicated": DEDICATED_OTHER_TENANT,
        "hot": resource_filter.CARDS_OVERLOADED, "ascend": gpu_filter.GPU_TYPE_MISMATCH,
    }
    [(name, total, *scores)] = diagnostics["scored"]
    assert name == "free"
    assert dict(zip(diagnostics["plugins"], scores)) == {"spread": result.scores[result.node.id]["spread"],
                                                         "nvlink": 50.0, "topology": 50.0, "rdma": 50.0,
                                                         "node-pools": 100.0, "model-locality": 0.0,
                                                         "card-health": 0.0, "replica-spread": 0.0}
    assert total == round(sum(scores), 3)
    assert result.message == ("1/5 nodes are available: 1 GPU memory above threshold, 1 GPU type mismatch, "
                              "1 dedicated to another tenant, 1 node offline.")
    assert result.filtered_by_reason() == {NODE_OFFLINE: ["offline"],
                                           DEDICATED_OTHER_TENANT: ["dedicated"],
                                           resource_filter.CARDS_OVERLOADED: ["hot"], gpu_filter.GPU_TYPE_MISMATCH: ["ascend"]}
    assert result.filtered[snapshot.nodes[0].id].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.filtered[snapshot.nodes[2].id].code == Code.UNSCHEDULABLE


def test_ties_are_broken_at_random():
    snapshot = make_snapshot(make_node(name="a"), make_node(name="b"), make_node(name="c", cpu_percent=50))
    rng = random.Random(42)
    picks = Counter(framework().schedule(make_task(gpu_required=1), snapshot, rng).node.name for _ in range(200))
    assert set(picks) == {"a", "b"} and min(picks.values()) > 60


def test_same_seed_same_choice():
    snapshot = make_snapshot(*[make_node() for _ in range(10)])
    first = [framework().schedule(make_task(gpu_required=1), snapshot, random.Random(7)).node.id for _ in range(3)]
    assert len(set(first)) == 1


def test_codes_when_nothing_fits():
    task = make_task(gpu_type="nvidia", gpu_required=1)
    unreachable = make_snapshot(make_node(status="offline"), make_node(gpu_type="ascend"))
    assert framework().schedule(task, unreachable, random.Random()).code == reasons.NO_SCHEDULABLE_NODES
    full = make_node(cards=1)
    occupy(full.cards[0], tenant_id=5)
    result = framework().schedule(task, make_snapshot(full, make_node(status="offline")), random.Random())
    assert result.code == reasons.INSUFFICIENT_RESOURCES and result.node is None
    assert result.message == "0/2 nodes are available: 1 Insufficient GPU, 1 node offline."


def test_a_full_node_of_the_wrong_type_is_a_type_mismatch():
    full_ascend = make_node(gpu_type="ascend", cards=1, gpu_used=1)
    occupy(full_ascend.cards[0], tenant_id=5)
    snapshot = make_snapshot(full_ascend, make_node(status="offline"))
    result = framework().schedule(make_task(gpu_type="nvidia", gpu_required=1), snapshot, random.Random())
    assert result.code == reasons.NO_SCHEDULABLE_NODES
    assert result.message == "0/2 nodes are available: 1 GPU type mismatch, 1 node offline."


def test_tenant_boundary_alone_gives_no_tenant_eligible_gpu():
    shared = make_node(cards=1)
    occupy(shared.cards[0], tenant_id=2, shard_mb=1000)
    snapshot = make_snapshot(shared, make_node(status="offline"))
    result = framework().schedule(make_task(tenant_id=1, gpu_memory_mb=1000), snapshot, random.Random())
    assert result.code == reasons.NO_TENANT_ELIGIBLE_GPU


def test_apply_bind_makes_the_next_fractional_task_respect_the_tenant_boundary():
    snapshot = make_snapshot(make_node(cards=1), tenancy=TenancyView())
    fw = framework()
    first = make_task(tenant_id=1, gpu_memory_mb=1000)
    result = fw.schedule(first, snapshot, random.Random())
    apply_bind(snapshot, first, result.node, fw.reserve(first, result.node, snapshot.tenancy))
    assert snapshot.nodes[0].cards[0].occupant_tenants == {1}
    same_tenant = fw.schedule(make_task(tenant_id=1, gpu_memory_mb=1000), snapshot, random.Random())
    assert same_tenant.node is not None
    assert fw.schedule(make_task(tenant_id=2, gpu_memory_mb=1000), snapshot,
                       random.Random()).code == reasons.NO_TENANT_ELIGIBLE_GPU


def test_apply_release_undoes_apply_bind_and_keeps_a_tenant_that_still_shares_the_card():
    snapshot = make_snapshot(make_node(cards=2), tenancy=TenancyView())
    node, fw = snapshot.nodes[0], framework()
    whole = make_task(tenant_id=1, gpu_required=1, type="inference")
    shards = [make_task(tenant_id=2, gpu_memory_mb=1000) for _ in range(2)]
    placed = []
    for task in (whole, *shards):
        cards = fw.reserve(task, fw.schedule(task, snapshot, random.Random()).node, snapshot.tenancy)
        apply_bind(snapshot, task, node, cards)
        placed.append((task, cards))
    shard_card = node.cards[placed[1][1][0]]
    assert placed[1][1] == placed[2][1] and shard_card.shard_tasks == 2

    apply_release(snapshot, shards[0], node, placed[1][1], staying=[placed[0], placed[2]])
    assert (shard_card.shard_tasks, shard_card.shard_memory_mb, shard_card.occupant_tenants) == (1, 1000, {2})
    apply_release(snapshot, shards[1], node, placed[2][1], staying=[placed[0]])
    assert shard_card.is_free and shard_card.occupant_tenants == set()
    apply_release(snapshot, whole, node, placed[0][1], staying=[])
    assert (node.gpu_used, node.inference_tasks) == (0, 0)
    assert all(card.is_free and not card.occupant_tenants for card in node.cards)
    # The table the framework filters over sees the freed node: two whole cards fit again.
    assert fw.schedule(make_task(gpu_required=2), snapshot, random.Random()).node is node


def test_inference_limit_per_node():
    config = SchedulerConfig(inference_max_per_node=2)
    fw = Framework(build_plugin_set([], default_registry(extra_plugins=[])), config)
    snapshot = make_snapshot(make_node())
    for _ in range(2):
        task = make_task(type="inference", gpu_required=1)
        result = fw.schedule(task, snapshot, random.Random())
        apply_bind(snapshot, task, result.node, fw.reserve(task, result.node))
    result = fw.schedule(make_task(type="inference", gpu_required=1), snapshot, random.Random())
    assert result.code == reasons.INSUFFICIENT_RESOURCES
    assert INFERENCE_LIMIT in result.message


def test_topology_required_is_hard_only_where_the_node_has_the_field():
    snapshot = make_snapshot(make_node(name="eu", zone="eu-1"), make_node(name="us", zone="us-1"),
                             make_node(name="unset"))
    task = make_task(gpu_required=1, labels={"topology": "required", "zone": "eu-1"})
    result = framework().schedule(task, snapshot, random.Random())
    assert result.node.name == "eu"  # zone +15 beats the unset node
    assert result.filtered_by_reason() == {ZONE_MISMATCH: ["us"]}
    assert len(result.totals) == 2


def test_diagnostics_keep_the_best_fifty_feasible_nodes():
    nodes = [make_node(cpu_percent=i) for i in range(60)] + [make_node(status="offline") for _ in range(3)]
    result = framework().schedule(make_task(gpu_required=1), make_snapshot(*nodes), random.Random())
    diagnostics = result.compact_diagnostics()
    assert sum(len(names) for names in diagnostics["filtered"].values()) == 3
    feasible = diagnostics["scored"]
    assert len(feasible) == 50
    assert feasible[0][0] == nodes[0].name
    assert [row[1] for row in feasible] == sorted((row[1] for row in feasible), reverse=True)


def test_custom_per_node_plugin_runs_in_the_pipeline():
    hot, cool = make_node(name="hot"), make_node(name="cool")
    for card in hot.cards:
        card.temperature = 80
    for card in cool.cards:
        card.temperature = 40
    fw = framework(extra_plugins=["tests.example_plugins.cool_cards.factory"])
    result = fw.schedule(make_task(gpu_required=1), make_snapshot(hot, cool), random.Random())
    assert result.node.name == "cool"
    assert result.filtered[hot.id].reasons == ("all cards too hot",)
    assert result.scores[cool.id]["cool-cards"] == 60


def captured(capture):
    topology = parse_nvidia_smi_topo((CAPTURES / capture).read_text())
    numa = [topology.numa[card] for card in topology.cards]
    node = make_node(cards=len(numa), labels={TOPOLOGY_LABEL: encode_label(topology)})
    for card, numa_node in zip(node.cards, numa):
        card.numa = numa_node
    return node


def test_reserve_with_nvlink_prefers_one_numa_node():
    dgx = captured("dgx-a100-8gpu-nv12-10nic.txt")
    assert framework().reserve(make_task(gpu_required=2), dgx) == [0, 1]
    quad = captured("4gpu-nv4-2numa-1nic.txt")
    occupy(quad.cards[0], tenant_id=3)
    assert framework().reserve(make_task(gpu_required=2), quad) == [2, 3]
    assert framework().reserve(make_task(gpu_required=4), quad) == []


def test_reserve_without_the_nvlink_plugin_ignores_the_topology():
    quad = captured("4gpu-nv4-2numa-1nic.txt")
    occupy(quad.cards[0], tenant_id=3)
    assert framework(PluginSetting("nvlink", False)).reserve(make_task(gpu_required=2), quad) == [1, 2]


def test_default_reserve_without_topology_takes_the_least_busy_lowest_index():
    node = make_node(cards=4)
    occupy(node.cards[1], tenant_id=3)
    assert default_cards(make_task(gpu_required=2), node, CONFIG) == [0, 2]
    assert framework().reserve(make_task(gpu_required=2), node) == [0, 2]


def test_default_reserve_fractional_takes_the_card_with_most_free_memory():
    node = make_node(cards=3)
    occupy(node.cards[0], tenant_id=1, shard_mb=2000)
    occupy(node.cards[1], tenant_id=2, shard_mb=1000)
    occupy(node.cards[2], tenant_id=1, shard_mb=1000)
    assert default_cards(make_task(tenant_id=1, gpu_memory_mb=500), node, CONFIG, tenancy=TenancyView()) == [2]


def test_pcie_node_spreads_a_multi_card_task_over_single_domains():
    pcie = captured("8gpu-pcie-pix-phb-sys.txt")
    occupy(pcie.cards[0], tenant_id=3)
    assert framework().reserve(make_task(gpu_required=3), pcie) == [1, 2, 3]


def test_total_is_the_weighted_sum():
    fast, plain = make_node(name="fast", labels={"rdma": "true", "rdma-speed": "400"}), make_node(name="plain")
    plain.cpu_percent = 0
    fast.cpu_percent = 30  # spread: fast loses 10 points (mean usage +0.1) but rdma gives +50 × weight
    fw = framework(PluginSetting("rdma", True, 3))
    result = fw.schedule(make_task(gpu_required=1), make_snapshot(fast, plain), random.Random())
    scores = result.scores[fast.id]
    expected = sum(weight * scores[name] for name, weight in
                   [("node-pools", 1), ("spread", 1), ("nvlink", 1), ("topology", 1), ("rdma", 3)])
    assert result.totals[fast.id] == pytest.approx(expected, abs=0.01)
    assert result.node.name == "fast"


class AvoidNode:
    """A post-scorer that vetoes one node by name, to check PostScore sees and changes the totals."""

    name = "avoid"

    def __init__(self, setting):
        self.avoided = setting.extra["node"]

    def post_score(self, state, task, totals):
        for node_id in totals:
            if node_id == self.avoided:
                totals[node_id] = -1


def test_post_score_can_change_totals():
    from scheduling.framework.registry import POST_SCORE, PluginSpec

    first, second = make_node(), make_node(cpu_percent=80)
    registry = default_registry(extra_plugins=[])
    registry.register(PluginSpec("avoid", AvoidNode, kinds=frozenset({POST_SCORE}),
                                 default=PluginSetting("avoid", True, 0, {"node": first.id})))
    fw = Framework(build_plugin_set([], registry), CONFIG)
    result = fw.schedule(make_task(gpu_required=1), make_snapshot(first, second), random.Random())
    assert result.node is second and result.totals[first.id] == -1


def test_attempt_nodes_keep_the_first_filtered_nodes_under_their_reasons_and_count_the_rest(monkeypatch):
    from scheduling.diagnostics import attempts as diagnostics

    monkeypatch.setattr(diagnostics, "FILTERED_NODES_KEPT", 4)
    snapshot = make_snapshot(make_node(name="busy", gpu_used=8),
                             *[make_node(name=f"off-{index}", status="offline") for index in range(5)],
                             make_node(name="free"), make_node(name="half", gpu_used=4))
    result = framework().schedule(make_task(gpu_required=1), snapshot, random.Random(1))

    nodes, extra = diagnostics.attempt_nodes(result)

    assert nodes["filtered"] == {NODE_OFFLINE: ["off-0", "off-1", "off-2"], INSUFFICIENT_GPU: ["busy"]}
    assert extra == {"filtered_nodes_not_listed": 2}
    by_name = {node.name: node.id for node in snapshot.nodes}
    assert [row[0] for row in nodes["scored"]] == sorted(["free", "half"], key=lambda name: -result.totals[by_name[name]])
    for name, total, *scores in nodes["scored"]:
        assert total == round(result.totals[by_name[name]], 3)
        assert dict(zip(nodes["plugins"], scores)) == result.scores[by_name[name]]
    assert result.message.startswith("2/8 nodes are available: 5 node offline, 1 Insufficient GPU")


class NoFriday:
    """A PreFilter and Permit plugin: refuses tasks labelled `day: friday` before any node, and placements on
    nodes labelled `frozen: true` at Permit."""

    name = "no-friday"

    def __init__(self, setting):
        pass

    def pre_filter(self, state, task, snapshot):
        if task.labels.get("day") == "friday":
            return Status.unschedulable("no deploys on friday", plugin=self.name, unresolvable=True)
        return Status(plugin=self.name)

    def permit(self, state, placements, world_size):
        if any(node.labels.get("frozen") == "true" for _task, node, _cards in placements):
            return Status.unschedulable("frozen node", plugin=self.name, attempt_code="Frozen")
        return Status(plugin=self.name)


def _with_no_friday():
    from scheduling.framework.registry import PERMIT, PRE_FILTER, PluginSpec

    registry = default_registry(extra_plugins=[])
    registry.register(PluginSpec("no-friday", NoFriday, kinds=frozenset({PRE_FILTER, PERMIT})))
    return Framework(build_plugin_set([], registry), CONFIG)


def test_a_pre_filter_refuses_the_task_before_any_node_is_looked_at():
    fw = _with_no_friday()
    snapshot = make_snapshot(make_node(), make_node())
    result = fw.schedule(make_task(gpu_required=1, labels={"day": "friday"}), snapshot, random.Random())
    assert result.node is None and result.pre_filtered
    assert (result.code, result.message, result.filtered_count) == (reasons.NO_SCHEDULABLE_NODES,
                                                                    "no deploys on friday", 0)
    assert fw.schedule(make_task(gpu_required=1), snapshot, random.Random()).node is not None


def test_the_quota_pre_filter_is_built_in():
    from scheduling.fair_share.book import QuotaBook

    snapshot = make_snapshot(make_node())
    snapshot.quotas = QuotaBook(caps={1: 200})
    snapshot.quotas.add_usage(1, "nvidia", False, 100)
    result = framework().schedule(make_task(tenant_id=1, gpu_required=2), snapshot, random.Random())
    assert (result.code, result.message) == (reasons.QUOTA_EXCEEDED, "quota exceeded: used 1 / quota 2, asked 2")


def test_permit_holds_a_gang_to_every_member_and_runs_the_permit_plugins():
    fw = _with_no_friday()
    node, frozen = make_node(), make_node(labels={"frozen": "true"})
    task = make_task(gpu_required=1)
    assert fw.permit([(task, node, [0])]).is_success
    partial = fw.permit([(task, node, [0])], world_size=2)
    assert (partial.is_success, partial.attempt_code) == (False, reasons.GANG_INCOMPLETE)
    refused = fw.permit([(task, frozen, [0])])
    assert (refused.is_success, refused.attempt_code, refused.reason) == (False, "Frozen", "frozen node")


def test_ranked_node_ids_are_the_totals_best_first_ties_in_node_order():
    """The bind's runners-up: what sorting `totals` by total gives, ties (the empty nodes) in node order."""
    nodes = [make_node(cards=8, cpu_percent=percent) for percent in (30, 0, 50, 0, 30, 0, 10)]
    for card in nodes[2].cards[:4]:
        occupy(card, 1)
    nodes[2].gpu_used = 4
    result = framework().schedule(make_task(gpu_required=1), make_snapshot(*nodes), random.Random(0))

    expected = [node_id for node_id, _ in sorted(result.totals.items(), key=lambda item: -item[1])]
    assert list(result.ranked_node_ids()) == expected
    assert expected[:3] == [nodes[1].id, nodes[3].id, nodes[5].id]
