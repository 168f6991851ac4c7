import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from nodes.agent.detectors import DETECTOR_FOR_TYPE, GPU_TYPES
from nodes.agent.detectors.base import PARSE_ERRORS, no_numa

READINGS = ("index", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature")


class Command(BaseCommand):
    help = ("Read a saved output of a vendor's GPU tool and print, as JSON, the cards the node agent would report "
            "from it (unknown readings are null).")

    def add_arguments(self, parser):
        parser.add_argument("vendor", choices=GPU_TYPES, help="GPU type id of the tool's vendor")
        parser.add_argument("file", type=Path, help="text file holding the tool's output")

    def handle(self, *args, vendor: str, file: Path, **options):
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}")
        try:
            cards = DETECTOR_FOR_TYPE[vendor](no_numa).parse(text)
        except PARSE_ERRORS as exc:
            # The agent reports no cards for output it cannot read; say why here.
            self.stderr.write(f"{file}: not understood as {vendor} output: {exc}")
            cards = []
        self.stdout.write(json.dumps([{name: getattr(card, name) for name in READINGS} for card in cards]))
