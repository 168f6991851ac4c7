from scheduling.framework.snapshot import CardInfo
from scheduling.plugins import gpu_filter
from scheduling.plugins.gpu_filter import GpuFilter
from tests.scheduling.framework.builders import make_cards, make_node, make_state, make_task


def passes(task, node) -> bool:
    return GpuFilter().filter(make_state(), task, node).is_success


def test_type_matches_the_stored_type():
    # Types are stored lower case where a request names them (tests/nodes/test_gpu_type_input.py).
    assert passes(make_task(gpu_type="nvidia", gpu_required=1), make_node(gpu_type="nvidia"))
    assert passes(make_task(gpu_type="ascend", gpu_required=1), make_node(gpu_type="ascend"))


def test_type_mismatch_is_rejected_with_its_reason():
    status = GpuFilter().filter(make_state(), make_task(gpu_type="nvidia", gpu_required=1), make_node(gpu_type="ascend"))
    assert status.reasons == (gpu_filter.GPU_TYPE_MISMATCH,)


def test_card_list_type_counts_when_the_node_label_differs():
    node = make_node(gpu_type="", card_list=make_cards(2, gpu_type="hygon"))
    node.gpu_type = ""
    assert passes(make_task(gpu_type="hygon", gpu_required=1), node)


def test_no_gpu_type_passes_everything():
    assert passes(make_task(gpu_required=1), make_node(gpu_type="musa"))


def test_node_without_reported_gpus_passes():
    assert passes(make_task(gpu_type="nvidia", gpu_required=1), make_node(cards=0))


def test_gpu_model_keeps_nodes_with_enough_cards_of_one_listed_model():
    node = make_node(card_list=make_cards(2, model="A100") + [CardInfo(index=2, type="nvidia", model="H100")])
    assert passes(make_task(gpu_required=2, labels={"gpu-model": "a100|H100"}), node)
    assert passes(make_task(gpu_required=1, labels={"gpu-model": "h100"}), node)
    # Two H100 are needed but only one is there; A100+H100 mixed does not count as "one model".
    status = GpuFilter().filter(make_state(), make_task(gpu_required=2, labels={"gpu-model": "H100|V100"}), node)
    assert status.reasons == (gpu_filter.GPU_MODEL_MISMATCH,)
    assert not passes(make_task(gpu_required=3, labels={"gpu-model": "A100|H100"}), node)


def test_gpu_model_for_fractional_tasks_needs_one_card():
    node = make_node(cards=1, model="H100")
    assert passes(make_task(gpu_memory_mb=1000, labels={"gpu-model": "h100"}), node)
    assert not passes(make_task(gpu_memory_mb=1000, labels={"gpu-model": "a100"}), node)
