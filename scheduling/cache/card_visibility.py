"""Which nodes' containers see every card (design §16.5). The node agent's runtime knows it per vendor
(`nodes.agent.runtime.CARDS_VISIBLE_TO_EVERY_CONTAINER`); the framework, which imports no app, reads it from
`NodeInfo.cards_visible_to_every_container`, set here by whoever builds a node from the database."""

from nodes.agent.runtime import CARDS_VISIBLE_TO_EVERY_CONTAINER
from scheduling.framework.snapshot import NodeInfo


def note_card_visibility(node: NodeInfo) -> None:
    """Set the node's flag from its GPU type label and card types (call once its cards are in)."""
    node.cards_visible_to_every_container = not CARDS_VISIBLE_TO_EVERY_CONTAINER.isdisjoint(node.gpu_types)
