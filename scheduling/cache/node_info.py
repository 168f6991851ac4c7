"""THE NodeInfo of a node read from the database, built one way for the snapshot (`snapshot_builder`, ORM rows) and
bind's live read (`scheduling.bind.live`, raw SQL under the row locks), so both see the same node: its cards in one
order, whether its containers see every card, and its active tasks as occupants."""

from collections.abc import Iterable

from nodes.agent.runtime import CARDS_VISIBLE_TO_EVERY_CONTAINER
from scheduling.framework.cards import cards_by_key
from scheduling.framework.occupancy import Occupant, assume
from scheduling.framework.snapshot import CardInfo, NodeInfo
from scheduling.plugins.card_health import hold_quarantined_cards


def assemble_node(node: NodeInfo, cards: Iterable[CardInfo], occupants: Iterable[Occupant]) -> NodeInfo:
    """`node` (its row's fields) with its cards, by type then index, its active tasks as occupants (which the
    row's `gpu_used` ledger already counts), and its quarantined cards held by nobody (design §17.3)."""
    node.cards = sorted(cards, key=lambda card: (card.type, card.index))
    note_card_visibility(node)
    by_key = cards_by_key(node)
    for occupant in occupants:
        assume(node, occupant, cards=by_key, ledger=False)
    hold_quarantined_cards(node)
    return node


def note_card_visibility(node: NodeInfo) -> None:
    """Whether the node's containers see every card (design §16.5): the node agent's runtime knows it per vendor
    (`nodes.agent.runtime.CARDS_VISIBLE_TO_EVERY_CONTAINER`); the framework, which imports no app, reads it from
    `NodeInfo.cards_visible_to_every_container`. Set from the GPU type label and card types, once the cards are in."""
    node.cards_visible_to_every_container = not CARDS_VISIBLE_TO_EVERY_CONTAINER.isdisjoint(node.gpu_types)
