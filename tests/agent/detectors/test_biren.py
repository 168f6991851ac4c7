import subprocess

import pytest

from nodes.agent.detectors.base import no_numa
from nodes.agent.detectors.biren import BirenDetector

from .fakes import FakeRunner, capture, capture_names, readings

BRSMI = "brsmi__biren106b_1gpu_1.11.0.txt"
CAPTURES = {BRSMI: [(0, "Biren106B", 32512, 0, 0, 30)]}


def test_every_biren_capture_has_its_expected_cards():
    assert capture_names("biren") == set(CAPTURES)


def test_brsmi_table_is_read_as_the_card_it_shows():
    runner = FakeRunner({"brsmi": capture("biren", BRSMI)})
    cards = BirenDetector(lambda bus_id: 1 if bus_id == "00000000:90:00.0" else None).detect(runner)
    assert readings(cards) == CAPTURES[BRSMI]
    assert (cards[0].type, cards[0].uuid, cards[0].numa) == ("biren", "biren-0000:90:00.0", 1)
    assert runner.command_lines() == ["brsmi"]


def test_a_second_gpu_with_work_on_it_is_read_through_the_header():
    text = capture("biren", BRSMI)
    card_rows = text.splitlines()[8:12]
    busy = [card_rows[0].replace("     0            Biren106B", "     1            Biren106B").replace(":90:", ":91:"),
            card_rows[1].replace("    30    P0     35W / 300W |       0MiB / 32512MiB |          0%",
                                 "    47    P0    210W / 300W |   20480MiB / 32512MiB |         87%"),
            card_rows[2], card_rows[3]]
    lines = text.splitlines()
    two_gpus = "\n".join(lines[:12] + busy + lines[12:]) + "\n"
    busy_card = (1, "Biren106B", 32512, 20480, 87, 47)
    assert readings(BirenDetector(no_numa).parse(two_gpus)) == CAPTURES[BRSMI] + [busy_card]


@pytest.mark.parametrize("answer", [
    FileNotFoundError(2, "No such file or directory"),
    subprocess.TimeoutExpired(["brsmi"], 15),
    "",
    "brsmi: error while loading shared libraries: libbiren-ml.so\n",
    capture("biren", BRSMI).replace("Memory-Usage", "Memory"),
])
def test_missing_failing_or_unreadable_brsmi_means_no_biren_cards(answer):
    assert BirenDetector(no_numa).detect(FakeRunner({"brsmi": answer})) == []
