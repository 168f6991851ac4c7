"""The fault schedule: every kind at least once, after the warm-up and before the quiet end, seeded."""

import pytest

from scheduling.soak.faults import KINDS, schedule


@pytest.mark.parametrize("minutes", [1, 8, 60])
def test_every_kind_comes_at_least_once_inside_the_loaded_part(minutes):
    planned = schedule(list(KINDS), minutes=minutes, seed=3)

    assert {kind for _, kind in planned} == set(KINDS)
    assert all(45 <= at <= max(60, minutes * 60 - 75) for at, _ in planned)
    assert [at for at, _ in planned] == sorted(at for at, _ in planned)


def test_the_same_seed_gives_the_same_schedule_and_long_runs_repeat_the_kinds():
    assert schedule(list(KINDS), minutes=8, seed=3) == schedule(list(KINDS), minutes=8, seed=3)
    assert schedule(list(KINDS), minutes=8, seed=3) != schedule(list(KINDS), minutes=8, seed=4)
    assert len(schedule(list(KINDS), minutes=60, seed=3)) > len(KINDS)


@pytest.mark.django_db(transaction=True)
def test_a_card_fails_under_its_task_which_leaves_it_within_a_liveness_period_then_it_is_released(
        live_server, settings, tenant, tmp_path):
    """The soak's "card-fails" fault against one simulated agent (played here in a thread with a scheduler)."""
    import random
    import threading

    from nodes.management.commands.simulate_fleet import Command as Fleet, SimulatedNode, simulated_agent
    from nodes.models import GPU, Node
    from scheduling.cycle.run import run_cycle
    from scheduling.models import Task
    from scheduling.soak.faults import FaultContext, inject
    from tests.factories import make_node, make_task

    settings.HETEROFLOW_JOIN_TOKEN = ""
    make_node(name="soak-a", cards=1, status="offline")
    fleet = Fleet()
    member = SimulatedNode.of(Node.objects.prefetch_related("gpus").get(name="soak-a"))
    agent = simulated_agent(live_server.url, fleet._register(live_server.url, fleet._admin_token(), member), member,
                            1.0, tmp_path / "soak-a")
    agent.run_once()
    task = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1, labels={"HETEROFLOW_SIM_SECONDS": "600"})
    run_cycle()
    agent.run_once()
    assert Task.objects.get(id=task.id).status == "running"
    stop = threading.Event()

    def play_agent():
        while not stop.is_set():
            agent.run_once()
            stop.wait(0.3)

    player = threading.Thread(target=play_agent)
    player.start()

    class Alive:
        alive = True

    class Supervisor:
        processes = {"fleet-1": Alive()}

    context = FaultContext(Supervisor(), [], "", "", {"fleet-1": ["soak-a"]}, [], fleet_state=tmp_path)
    try:
        detail = inject("card-fails", context, random.Random(1))
    finally:
        stop.set()
        player.join()
        agent.close()
    assert context.violations == []
    assert detail.startswith(f"soak-a nvidia0 failed under tasks [{task.id}]: off the card after")
    assert detail.endswith("repaired and released")
    moved = Task.objects.get(id=task.id)
    assert moved.status == "pending" and moved.preempt_count == 0
    assert not GPU.objects.get(node__name="soak-a").quarantined
