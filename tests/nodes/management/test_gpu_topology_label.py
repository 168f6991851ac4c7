import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from nodes.agent.topology import decode_label, nvlink_domains
from tests.shared_data import TOPOLOGY_CAPTURES

FIXTURES = TOPOLOGY_CAPTURES
DGX_NUMA = {"0": 3, "1": 3, "2": 1, "3": 1, "4": 7, "5": 7, "6": 5, "7": 5}


def _run(path: Path) -> dict:
    out = StringIO()
    call_command("gpu_topology_label", str(path), stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    ("fixture", "domains", "numa"),
    [
        ("1gpu-6nic.txt", [[0]], {"0": 0}),
        ("2gpu-nv4-gpu-numa-id.txt", [[0, 1]], {"0": 0, "1": 0}),
        ("4gpu-nv4-2numa-1nic.txt", [[0, 1, 2, 3]], {"0": 0, "1": 0, "2": 1, "3": 1}),
        ("8gpu-pcie-pix-phb-sys.txt", [[i] for i in range(8)], {str(i): None for i in range(8)}),
        ("dgx-a100-8gpu-nv12-10nic.txt", [list(range(8))], DGX_NUMA),
    ],
)
def test_prints_domains_numa_and_a_label_that_decodes_to_the_same(fixture, domains, numa):
    body = _run(FIXTURES / fixture)
    assert (body["domains"], body["numa"]) == (domains, numa)
    decoded = decode_label(body["label"])
    assert nvlink_domains(decoded) == domains
    assert {str(card): node for card, node in decoded.numa.items()} == numa


def test_unreadable_or_foreign_input_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        _run(tmp_path / "missing.txt")
    (tmp_path / "junk.txt").write_text("hello\n")
    with pytest.raises(CommandError, match="no GPU header"):
        _run(tmp_path / "junk.txt")
