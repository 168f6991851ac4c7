import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from nodes.agent.detectors.base import PARSE_ERRORS
from nodes.agent.health import READER_FOR_TYPE


class Command(BaseCommand):
    help = ("Read a saved output of a vendor's GPU tool (or, for NVIDIA, a kernel log) and print, as JSON, the card "
            "health the node agent would report from it: {verdict, cards: [{index, health, errors}], errors} "
            "(design §17.3).")

    def add_arguments(self, parser):
        parser.add_argument("vendor", choices=sorted(READER_FOR_TYPE), help="GPU type id of the tool's vendor")
        parser.add_argument("file", type=Path, help="text file holding the tool's output")

    def handle(self, *args, vendor: str, file: Path, **options):
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}")
        try:
            report = READER_FOR_TYPE[vendor]().parse(text)
        except PARSE_ERRORS as exc:
            raise CommandError(f"{file}: not understood as {vendor} health output: {exc}")
        self.stdout.write(json.dumps(report.to_json()))
