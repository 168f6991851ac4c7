import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from nodes.agent.topology import encode_label, nvlink_domains, parse_nvidia_smi_topo


class Command(BaseCommand):
    help = "Read a saved `nvidia-smi topo -m` output and print its NVLink domains, NUMA nodes and node label as JSON."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="text file holding `nvidia-smi topo -m` output")

    def handle(self, *args, file: Path, **options):
        try:
            topology = parse_nvidia_smi_topo(file.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}")
        except ValueError as exc:
            raise CommandError(f"{file}: {exc}")
        body = {
            "domains": nvlink_domains(topology),
            "numa": {str(card): numa for card, numa in sorted(topology.numa.items())},
            "label": encode_label(topology),
        }
        self.stdout.write(json.dumps(body))
