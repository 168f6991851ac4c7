"""`manage.py card_fault NODE INDEX [--type T] [--clear]`: make a simulated fleet's card fail (or recover) while the
fleet runs (design §17.3); its agent reports it from its next heartbeat on."""

import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from heteroflow_site.validation import normalised_gpu_type
from nodes.agent.simulated_health import card_fault_clear, card_fault_inject
from nodes.models import GPU


class Command(BaseCommand):
    help = ("Inject a card fault into the simulated fleet (the card reports failed with an Xid 79 until cleared), or "
            "clear it with --clear: the card then reports healthy, and an admin (or HETEROFLOW_CARD_AUTO_RELEASE) "
            "releases it.")

    def add_arguments(self, parser):
        parser.add_argument("node", help="the node's name")
        parser.add_argument("index", type=int, help="the card's index")
        parser.add_argument("--type", dest="card_type", default="",
                            help="the card's GPU type on a node with cards of several vendors")
        parser.add_argument("--clear", action="store_true", help="the card recovers")
        parser.add_argument("--state-dir", type=Path, default=Path(tempfile.gettempdir()) / "heteroflow-fleet",
                            help="the simulate_fleet --state-dir of the fleet running the node")

    def handle(self, *args, node: str, index: int, card_type: str, clear: bool, state_dir: Path, **options):
        cards = GPU.objects.filter(node__name=node, index=index)
        if card_type:
            cards = cards.filter(type=normalised_gpu_type(card_type))
        card = cards.order_by("type").first()
        if card is None:
            raise CommandError(f"node {node!r} has no card {card_type}{index}")
        if clear:
            cleared = card_fault_clear(state_dir / node, card_type=card.type, index=index)
            self.stdout.write(f"{node} {card.type}{index}: " + ("fault cleared" if cleared else "had no fault"))
            return
        fault = card_fault_inject(state_dir / node, card_type=card.type, index=index)
        self.stdout.write(f"{node} {card.type}{index}: fails from the next heartbeat ({fault['code']})")
