import pytest

from scheduling.plugins.binpack import Binpack
from scheduling.plugins.spread import Spread
from tests.scheduling.framework.builders import make_node, make_state, make_task


def test_usage_is_the_mean_of_cpu_memory_and_gpu():
    # u_cpu = 0.4, u_mem = 128 GB / 512 GB = 0.25, u_gpu = (2 + 2) / 8 = 0.5 → mean 0.38333
    node = make_node(cpu_percent=40, memory_used_mb=128 * 1024, memory_gb=512, gpu_used=2)
    task = make_task(gpu_required=2)
    assert Spread().score(make_state(), task, node) == pytest.approx(100 * (1 - 1.15 / 3))
    assert Binpack().score(make_state(), task, node) == pytest.approx(100 * 1.15 / 3)


def test_gpu_term_is_left_out_on_a_node_without_cards():
    node = make_node(cards=0, cpu_percent=40, memory_used_mb=128 * 1024, memory_gb=512)
    assert Binpack().score(make_state(), make_task(), node) == pytest.approx(100 * 0.65 / 2)


def test_cpu_usage_does_not_depend_on_cores():
    task = make_task(gpu_required=1)
    small = make_node(cpu_cores=8, cpu_percent=50)
    large = make_node(cpu_cores=128, cpu_percent=50)
    assert Spread().score(make_state(), task, small) == Spread().score(make_state(), task, large)


def test_on_a_mixed_vendor_node_the_gpu_term_counts_the_cards_of_the_tasks_type_only():
    from tests.scheduling.framework.builders import make_cards

    ascend = make_cards(4, gpu_type="ascend", model="Ascend 910B")
    for card in ascend:
        card.whole_card_tasks = 1
    mixed = make_node(card_list=make_cards(4) + ascend, gpu_used=4)  # every Ascend card held, NVIDIA all free
    task = make_task(gpu_type="nvidia", gpu_required=1)
    # u_gpu = (0 + 1) / 4 NVIDIA cards, not (4 + 1) / 8 cards of both vendors.
    assert Binpack().score(make_state(), task, mixed) == pytest.approx(100 * 0.25 / 3)
