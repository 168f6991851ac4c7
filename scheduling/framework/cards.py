"""Which of a node's cards a task may take (design §15.2, §15.3): the one rule filter, card choice (Reserve) and the
bind re-check share.

A card is known on its node by `(type, index)`: each vendor numbers its cards from 0, so a node with cards of two
vendors repeats indexes. A task takes cards of ONE group only: cards of its `gpu_type` (any one type when it names
none — never a mix), and with a `gpu-model` label cards of one model matching it (`scheduling.framework.gpu_models`).
"""

from scheduling.framework.snapshot import CardInfo, NodeInfo, TaskInfo
from scheduling.framework.gpu_models import MODEL_LABEL, model_matches


class ChosenCards(list):
    """Card indexes chosen for a task, all of one `card_type` ("" when the node reported no types)."""

    def __init__(self, indexes=(), card_type: str = "") -> None:
        super().__init__(indexes)
        self.card_type = card_type


def card_type_of(card: CardInfo, node: NodeInfo) -> str:
    return card.type or node.gpu_type


def model_expression(task: TaskInfo) -> str:
    return str(task.labels.get(MODEL_LABEL, "") or "").strip()


def card_class(task: TaskInfo) -> tuple[str, str]:
    """What `card_groups` reads of a task: its GPU type and gpu-model expression."""
    return task.gpu_type, model_expression(task)


def card_groups(task: TaskInfo, node: NodeInfo) -> list[tuple[str, list[CardInfo]]]:
    """The groups of the node's cards the task may take from, as (card type, cards); the task takes all its cards
    from one of them. Cached on the node (apply_bind clears the cache)."""
    key = ("card-groups", *card_class(task))
    cached = node.cache.get(key)
    if cached is not None:
        return cached
    wanted, expression = key[1], key[2]
    groups: dict[tuple[str, str], list[CardInfo]] = {}
    for card in node.cards:
        card_type = card_type_of(card, node)
        if wanted and card_type != wanted:
            continue
        if expression and not model_matches(expression, card.model):
            continue
        groups.setdefault((card_type, card.model if expression else ""), []).append(card)
    result = node.cache[key] = [(group_key[0], cards) for group_key, cards in sorted(groups.items())]
    return result


def cards_are_uniform(node: NodeInfo) -> bool:
    """Every card of the node has the same type and model: then every card is in the one group a task that passed
    gpu-filter may take from, and the vectorised filters need no grouping."""
    return len({(card_type_of(card, node), card.model) for card in node.cards}) <= 1


def card_lookup(cards: dict[tuple[str, int], CardInfo], *, card_type: str, index: int,
                node_gpu_type: str) -> CardInfo | None:
    """A held card by its `(type, index)`; a placement recorded before card types were kept names the node's
    type, or failing that any card of that index."""
    card = cards.get((card_type or node_gpu_type, index))
    if card is None and not card_type:
        card = next((held for (_, held_index), held in cards.items() if held_index == index), None)
    return card


def cards_by_key(node: NodeInfo) -> dict[tuple[str, int], CardInfo]:
    return {(card_type_of(card, node), card.index): card for card in node.cards}
