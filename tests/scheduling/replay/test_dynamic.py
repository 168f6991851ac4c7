"""The replay with departures (design §15.9, `replay_trace --dynamic`) on hand-made traces whose outcome is known,
and on a cut of openb for determinism."""

import json
from pathlib import Path

import numpy as np
import pytest

from scheduling.replay.dynamic import DynamicReplay, TenantPlan, jain_index, jobs_of
from scheduling.replay.trace import TraceError, TraceNode, TracePod, read_nodes, read_pod_times

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"
GPU_NODE = TraceNode("node-1", 32_000, 262_144, 1, "V100M16")


def pod(name: str, created: int, deleted: int, *, cards: int = 1, milli: int = 1000, cpu: int = 4000) -> TracePod:
    return TracePod(name, cpu, 8192, cards, milli if cards == 1 else 1000 * bool(cards), "", created, deleted)


def run(nodes, pods, *, policy="binpack", seed=0, compress=1.0, tenants=None):
    return DynamicReplay(nodes, jobs_of(pods, compress=compress, tenants=tenants), policy=policy, seed=seed,
                         tenants=tenants).run()


def test_a_task_that_does_not_fit_waits_and_gets_the_cards_the_leaving_task_frees():
    result = run([GPU_NODE], [pod("first", 0, 100), pod("second", 10, 50)])

    one_card = result.classes["1 card"]
    assert (one_card["placed"], one_card["never_placed"]) == (2, 0)
    # second waits from 10 until first leaves at 100, then runs its own 40 s.
    assert one_card["wait_p50"] == pytest.approx(45.0) and one_card["wait_p99"] == pytest.approx(89.1)
    assert result.time_weighted_allocation == pytest.approx(100.0)   # the window (0 → 10 s) held the card


def test_waiting_follows_arrival_order_and_a_task_that_fits_is_not_held_behind_one_that_does_not():
    two_cards = TraceNode("node-2", 64_000, 262_144, 2, "V100M16")
    pods = [pod("holder", 0, 100), pod("big", 1, 50, cards=2), pod("small-a", 2, 10), pod("small-b", 3, 10)]

    result = run([two_cards], pods)

    # small-a takes the free card at once (the 2-card task waiting before it does not block it, design §15.1) and
    # runs 8 s; small-b waits for it until 10 (7 s); big waits until both cards are free, when holder leaves at 100.
    assert result.classes["1 card"]["placed"] == 3
    assert result.classes["1 card"]["wait_p99"] == pytest.approx(float(np.percentile([0, 0, 7], 99)))
    assert result.classes["2 cards"]["wait_p50"] == pytest.approx(99.0)


def test_a_task_that_never_fits_is_counted_as_never_placed():
    result = run([GPU_NODE], [pod("too-big", 0, 10, cards=2), pod("fits", 1, 5)])

    assert result.never_placed == 1
    assert result.classes["2 cards"] == {"tasks": 1, "placed": 0, "never_placed": 1, "wait_p50": None,
                                         "wait_p99": None}


def test_compress_brings_arrivals_closer_and_keeps_how_long_tasks_run():
    pods = [pod("first", 0, 100), pod("second", 1000, 1010)]

    relaxed = run([GPU_NODE], pods)
    compressed = run([GPU_NODE], pods, compress=100)   # second arrives at 10 s, first still runs until 100 s

    assert relaxed.classes["1 card"]["wait_p99"] == 0.0
    assert compressed.classes["1 card"]["wait_p50"] == pytest.approx(45.0)


def test_a_seed_replays_identically():
    nodes = read_nodes(TRACE / "openb_node_list_gpu_node.csv")[::60]
    pods = read_pod_times(TRACE / "openb_pod_list_default.csv")[::8]

    first, again = (run(nodes, pods, policy="fgd", seed=1, compress=200) for _ in range(2))

    assert first == again
    assert first.classes["1 card"]["placed"] > 0 and first.time_weighted_allocation > 0


def test_tenant_quotas_hold_tasks_back_and_usage_and_jain_are_reported(tmp_path):
    node = TraceNode("node-4", 64_000, 262_144, 4, "V100M16")
    plan_file = tmp_path / "tenants.json"
    plan_file.write_text(json.dumps({"tenants": {"acme": {"gpu_quota": 1}, "globex": {"gpu_quota": 3}},
                                     "pods": {"a1": "acme", "a2": "acme"}, "default": "globex"}))
    plan = TenantPlan.read(plan_file)
    pods = [pod("a1", 0, 100), pod("a2", 0, 100), pod("g1", 0, 100), pod("end", 100, 101)]

    result = run([node], pods, tenants=plan)

    # acme's second card waits for its quota (until a1 leaves at 100) although two cards stay free.
    assert result.classes["1 card"]["wait_p99"] == pytest.approx(float(np.percentile([0, 100, 0, 0], 99)))
    assert result.tenants["acme"]["mean_gpus"] == pytest.approx(1.0)
    assert result.tenants["globex"]["mean_gpus"] == pytest.approx(1.0)
    # shares of quota: acme 1/1, globex 1/3.
    assert result.jain == pytest.approx(jain_index([1.0, 1 / 3]))


def _sharing(tmp_path, *, cohort: bool) -> TenantPlan:
    """Two tenants of nominal 2 on four cards; `burst`'s pods are named b…, the others are `steady`'s."""
    plan_file = tmp_path / "tenants.json"
    spec = {"nominal": 2, **({"cohort": "lab"} if cohort else {})}
    plan_file.write_text(json.dumps({"tenants": {"steady": spec, "burst": spec},
                                     "pods": {"b1": "burst", "b2": "burst"}, "default": "steady"}))
    return TenantPlan.read(plan_file)


@pytest.mark.parametrize("cohort", [False, True])
def test_a_cohort_lends_idle_nominal_quota_and_reclaims_it_when_its_tenant_submits(tmp_path, cohort):
    node = TraceNode("node-4", 64_000, 262_144, 4, "V100M16")
    pods = [*(pod(f"s{number}", 0, 1000) for number in range(4)), pod("b1", 100, 1100), pod("b2", 100, 1100),
            pod("end", 200, 201)]

    result = run([node], pods, tenants=_sharing(tmp_path, cohort=cohort))

    burst, steady = result.tenants["burst"], result.tenants["steady"]
    # burst's two tasks are within its nominal: they start at once, by reclaiming the cards steady borrowed.
    assert (burst["within_nominal_wait_p50"], burst["within_nominal_wait_p99"]) == (0.0, 0.0)
    if cohort:
        # steady held all four cards until burst came (100 s of the 200 s window), then its nominal two.
        assert result.evicted == 2 and steady["mean_gpus"] == pytest.approx(3.0)
        assert result.time_weighted_allocation == pytest.approx(100.0)
    else:
        assert result.evicted == 0 and steady["mean_gpus"] == pytest.approx(2.0)
        assert result.time_weighted_allocation == pytest.approx(75.0)
    assert burst["mean_gpus"] == pytest.approx(1.0)
    assert steady["share_of_quota"] == pytest.approx(steady["mean_gpus"] / 2)
    # Over the second half both hold their nominal two cards.
    assert result.jain_second_half == pytest.approx(1.0, abs=1e-3)
    assert result.never_placed == 0


@pytest.mark.parametrize("content, message", [
    ("not json", "Expecting value"),
    ({"tenants": {}}, "expected"),
    ({"tenants": {"acme": {"burst": 3}}}, "unknown key(s) burst"),
    ({"tenants": {"acme": {"gpu_quota": -1}}}, "gpu_quota must be a whole number"),
    ({"tenants": {"acme": {"nominal": -0.5}}}, "nominal must be a number of cards"),
    ({"tenants": {"acme": {"nominal": "4"}}}, "nominal must be a number of cards"),
    ({"tenants": {"acme": {"cohort": 7}}}, "cohort must be a name"),
    ({"tenants": {"acme": {}}, "pods": {"p": "nobody"}}, "unknown tenant(s) nobody"),
])
def test_a_bad_tenants_file_is_refused_with_its_reason(tmp_path, content, message):
    path = tmp_path / "tenants.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TenantPlan.read(path)


def test_a_pod_without_a_tenant_and_no_default_is_refused(tmp_path):
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": {"acme": {}}, "pods": {"a": "acme"}}))
    with pytest.raises(TraceError, match="pod b has no tenant"):
        TenantPlan.read(path).assign([pod("a", 0, 1), pod("b", 0, 1)])


def test_jain_index():
    assert jain_index([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def _two_tenants(tmp_path, nominal: int) -> TenantPlan:
    """`heavy` (pods h…) and `light` (pods l…), each of nominal `nominal`, hard caps."""
    plan_file = tmp_path / "tenants.json"
    plan_file.write_text(json.dumps({"tenants": {"heavy": {"nominal": nominal}, "light": {"nominal": nominal}},
                                     "pods": {"l1": "light"}, "default": "heavy"}))
    return TenantPlan.read(plan_file)


def _light_wait(nodes, pods, plan, order) -> float:
    result = DynamicReplay(nodes, jobs_of(pods, compress=1.0, tenants=plan), policy="binpack", seed=0,
                           tenants=plan, queue_order=order).run()
    return result.tenants["light"]["within_nominal_wait_p50"]


@pytest.mark.parametrize("order, wait", [("priority", 198.0), ("dominant-share", 198.0), ("fair-share", 98.0)])
def test_only_the_decayed_order_remembers_what_a_tenant_used_before(tmp_path, order, wait):
    # heavy ran the only card until 100 and holds nothing then, like light: only its past tells them apart.
    pods = [pod("h0", 0, 100), pod("h1", 1, 101), pod("l1", 2, 102), pod("end", 400, 401)]

    assert _light_wait([GPU_NODE], pods, _two_tenants(tmp_path, 1), order) == pytest.approx(wait)


@pytest.mark.parametrize("order, wait", [("priority", 198.0), ("dominant-share", 98.0), ("fair-share", 98.0)])
def test_the_share_orders_put_the_tenant_holding_less_first(tmp_path, order, wait):
    two_cards = TraceNode("node-2", 64_000, 262_144, 2, "V100M16")
    # At 100 one card frees; heavy still holds the other.
    pods = [pod("hA", 0, 1000), pod("hB", 0, 100), pod("h1", 1, 101), pod("l1", 2, 102), pod("end", 1100, 1101)]

    assert _light_wait([two_cards], pods, _two_tenants(tmp_path, 2), order) == pytest.approx(wait)


def test_a_share_order_needs_tenants_with_a_nominal():
    with pytest.raises(TraceError, match="needs --tenants"):
        DynamicReplay([GPU_NODE], jobs_of([pod("a", 0, 1)], compress=1.0), policy="binpack", seed=0,
                      queue_order="fair-share")
