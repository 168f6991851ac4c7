"""`closest_node` (design §16.3): the node with the most free cards for the job, lowest id among equals, found
without looking at every node of a large idle cluster."""

from scheduling.framework.framework import Framework
from scheduling.framework.gpu_models import MODEL_LABEL
from scheduling.framework.registry import build_plugin_set
from scheduling.plugins import default_registry
from scheduling.queue import reservation
from tests.scheduling.framework.builders import CONFIG, make_cards, make_node, make_snapshot, make_task, occupy


def _could_hold(snapshot):
    return Framework(build_plugin_set([], default_registry()), CONFIG).once_emptied(snapshot)


def test_on_an_idle_cluster_the_lowest_id_of_the_emptiest_nodes_is_found_after_looking_at_two():
    nodes = [make_node(id=1000 + i, cards=8) for i in range(2000)]
    snapshot = make_snapshot(*reversed(nodes))
    looked_at = []
    could_hold = _could_hold(snapshot)

    best = reservation.closest_node(make_task(gpu_type="nvidia", gpu_required=8),
                                    lambda task, node: looked_at.append(node.id) or could_hold(task, node),
                                    order=reservation.most_free_first(snapshot))

    assert best.id == 1000
    assert len(looked_at) <= 2


def test_a_node_with_as_many_usable_free_cards_and_a_lower_id_wins_over_one_with_more_free_cards_in_all():
    """The node with 9 free cards has only 8 of the model the job asks for: the lower id with 8 free wins the tie,
    and the search goes on past a node with more free cards until it cannot tie any more."""
    mixed = make_node(id=50, card_list=make_cards(8, model="A100") + make_cards(1, model="H100"))
    mixed.cards[8].index = 8
    lower = make_node(id=10, cards=8, model="A100")
    busier = make_node(id=5, cards=8, model="A100")
    occupy(busier.cards[0], tenant_id=2)
    busier.gpu_used = 1
    job = make_task(gpu_type="nvidia", gpu_required=8, labels={MODEL_LABEL: "A100"})

    assert _closest(job, busier, mixed, lower).id == 10
    assert _closest(job, busier, mixed).id == 50


def _closest(job, *nodes):
    snapshot = make_snapshot(*nodes)
    return reservation.closest_node(job, _could_hold(snapshot), order=reservation.most_free_first(snapshot))
