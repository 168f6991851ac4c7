import subprocess

import pytest

from nodes.agent.detectors.base import canonical_bus_id, no_numa
from nodes.agent.detectors.cambricon import CambriconDetector

from .fakes import FakeRunner, capture, capture_names, readings

CAPTURES = {
    "cnmon__mlu370-x8_2card_v5.10.13.txt": [
        (0, "MLU370-X8", 23374, 0, 0, 32),
        (1, "MLU370-X8", 23374, 0, 0, 39),
    ],
    "cnmon__mlu370-x4_3card_v4.20.11.txt": [
        (0, "MLU370-X4", 23308, 0, 0, 32),
        (1, "MLU370-X4", 23308, 0, 0, 33),
        (2, "MLU370-X4", 23308, 0, 0, 30),
    ],
}


def test_every_cambricon_capture_has_its_expected_cards():
    assert capture_names("cambricon") == set(CAPTURES)


@pytest.mark.parametrize(("name", "expected"), CAPTURES.items())
def test_cnmon_table_is_read_as_the_cards_it_shows(name, expected):
    runner = FakeRunner({"cnmon": capture("cambricon", name)})
    cards = CambriconDetector(no_numa).detect(runner)
    assert readings(cards) == expected
    assert {card.type for card in cards} == {"cambricon"}
    assert runner.command_lines() == ["cnmon"]


def test_cnmon_5_cards_are_placed_by_bus_id_and_4_20_cards_by_index():
    numa = {"0000:39:00.0": 0, "0000:3d:00.0": 1}
    detector = CambriconDetector(lambda bus_id: numa.get(canonical_bus_id(bus_id)))
    cards = detector.parse(capture("cambricon", "cnmon__mlu370-x8_2card_v5.10.13.txt"))
    # cnmon prints "0000:3D:00.0"; the card id uses sysfs' lower-case spelling.
    assert [(card.uuid, card.numa) for card in cards] == [("cambricon-0000:39:00.0", 0), ("cambricon-0000:3d:00.0", 1)]
    old = CambriconDetector(no_numa).parse(capture("cambricon", "cnmon__mlu370-x4_3card_v4.20.11.txt"))
    assert [card.uuid for card in old] == ["cambricon-0", "cambricon-1", "cambricon-2"]


def test_the_process_table_and_the_virtual_memory_column_are_not_the_cards_memory():
    text = capture("cambricon", "cnmon__mlu370-x4_3card_v4.20.11.txt")
    busy = text.replace("|     0 MiB/ 23308 MiB | 10240 MiB/1048576 MiB |",
                        "|  1024 MiB/ 23308 MiB | 10240 MiB/1048576 MiB |", 1)
    busy = busy.replace("|  No running processes found                                                  |",
                        "|     0     /   4242   python train.py                               1024 MiB  |")
    assert readings(CambriconDetector(no_numa).parse(busy))[0] == (0, "MLU370-X4", 23308, 1024, 0, 32)
    assert len(CambriconDetector(no_numa).parse(busy)) == 3


def test_unavailable_readings_are_unknown_not_a_failure():
    text = capture("cambricon", "cnmon__mlu370-x8_2card_v5.10.13.txt").replace(
        "|  0%   39C        106 W/ 250 W |     0 MiB/ 23374 MiB |",
        "| N/A   N/A        N/A W/ 250 W |   N/A MiB/ 23374 MiB |")
    assert readings(CambriconDetector(no_numa).parse(text))[1] == (1, "MLU370-X8", 23374, None, 0, None)


@pytest.mark.parametrize("answer", [
    FileNotFoundError(2, "No such file or directory"),
    subprocess.CalledProcessError(1, ["cnmon"], stderr="cndev init failed"),
    "",
    "Card 0\n    Product Name : MLU370-X8\n",
    capture("cambricon", "cnmon__mlu370-x8_2card_v5.10.13.txt")[:400],
])
def test_missing_failing_or_unreadable_cnmon_means_no_cambricon_cards(answer):
    assert CambriconDetector(no_numa).detect(FakeRunner({"cnmon": answer})) == []
