import subprocess

import pytest

from nodes.agent.detectors.base import no_numa
from nodes.agent.detectors.enflame import EnflameDetector

from .fakes import FakeRunner, capture, capture_names, readings

QUERY_MEM_SIZE = "efsmi_-q_-d_TEMP_MEMORY_USAGE_PCIE__dev-c035_2dev_mem-size-format.txt"
QUERY_TOTAL_SIZE = "efsmi_-q_-d_TEMP_MEMORY_USAGE_PCIE__dev-c035_2dev_total-size-format.txt"
QUERY_TRUNCATED = "efsmi_-q_-d_TEMP_MEMORY_USAGE_PCIE__dev-c035_2dev_bar-mem-format_truncated.txt"
TABLE_S60 = "efsmi__s60_2card_1.2.0.301.txt"
TABLE_L300 = "efsmi__l300_1card_1.7.2.14.txt"

# The -q captures are of `-d TEMP,MEMORY,USAGE,PCIE`, which leaves out the Device Info section and so the model.
# The default table shows the memory size but not how much of it is used.
CAPTURES = {
    QUERY_MEM_SIZE: [(0, None, 42976, 1129, 0, 39), (1, None, 42976, 1129, 0, 39)],
    QUERY_TOTAL_SIZE: [(0, None, 42976, 24028, 0, 58), (1, None, 42976, 24028, 0, 59)],
    # Cut off inside DEV ID 1's PCIe section: that device is there, but none of its readings are.
    QUERY_TRUNCATED: [(0, None, 42976, 8684, 0, 76), (1, None, None, None, None, None)],
    TABLE_S60: [(0, "S60", 49120, None, 0, 39), (1, "S60", 42976, None, 0, 46)],
    TABLE_L300: [(0, "Enflame L300", 147456, None, 0, 35)],
}
BUS_IDS = {
    QUERY_MEM_SIZE: ["0000:0c:00.0", "0000:0f:00.0"],
    QUERY_TOTAL_SIZE: ["0000:0c:00.0", "0000:0f:00.0"],
    QUERY_TRUNCATED: ["0000:0c:00.0", "0000:0f:00.0"],
    TABLE_S60: ["0000:01:00.0", "0000:09:00.0"],
    TABLE_L300: ["0000:2d:00.0"],
}


def test_every_enflame_capture_has_its_expected_cards():
    assert capture_names("enflame") == set(CAPTURES) == set(BUS_IDS)


@pytest.mark.parametrize(("name", "expected"), CAPTURES.items())
def test_efsmi_capture_is_read_as_the_cards_it_shows(name, expected):
    command = "efsmi -q" if name.startswith("efsmi_-q") else "efsmi"
    cards = EnflameDetector(no_numa).detect(FakeRunner({"efsmi -q": subprocess.CalledProcessError(2, "efsmi"),
                                                        command: capture("enflame", name)}))
    assert readings(cards) == expected
    assert [card.uuid for card in cards] == [f"enflame-{bus_id}" for bus_id in BUS_IDS[name]]
    assert {card.type for card in cards} == {"enflame"}


def test_query_mode_comes_first_and_the_table_is_not_run_when_it_answers():
    runner = FakeRunner({"efsmi -q": capture("enflame", QUERY_TOTAL_SIZE), "efsmi": capture("enflame", TABLE_S60)})
    assert readings(EnflameDetector(no_numa).detect(runner)) == CAPTURES[QUERY_TOTAL_SIZE]
    assert runner.command_lines() == ["efsmi -q"]


@pytest.mark.parametrize("query_answer", [
    subprocess.CalledProcessError(1, ["efsmi", "-q"]),
    "Invalid option: -q\n",
    "",
])
def test_the_default_table_is_the_fallback_when_query_mode_fails_or_is_not_understood(query_answer):
    runner = FakeRunner({"efsmi -q": query_answer, "efsmi": capture("enflame", TABLE_L300)})
    assert readings(EnflameDetector(no_numa).detect(runner)) == CAPTURES[TABLE_L300]
    assert runner.command_lines() == ["efsmi -q", "efsmi"]


def test_full_query_output_names_the_model_from_device_info():
    # `efsmi -q` without -d adds a Device Info section (`Dev Name : S60`, zstack-utility's efsmi -q sample).
    text = capture("enflame", QUERY_MEM_SIZE).replace(
        "DEV ID 1\n", "DEV ID 1\n    Device Info\n        Dev Name                : S60\n")
    assert [card.model for card in EnflameDetector(no_numa).parse(text)] == [None, "S60"]


def test_bar_memory_sizes_are_not_the_device_memory():
    text = capture("enflame", QUERY_TRUNCATED)
    without_device_memory = text.replace("        Total Size              : 42976 MiB\n", "", 1)
    assert EnflameDetector(no_numa).parse(without_device_memory)[0].memory_total_mb is None


@pytest.mark.parametrize("answer", [
    FileNotFoundError(2, "No such file or directory"),
    subprocess.CalledProcessError(255, ["efsmi"], stderr="Failed to initialize EFML"),
    "",
    "garbage | x | y\n",
])
def test_missing_failing_or_unreadable_efsmi_means_no_enflame_cards(answer):
    runner = FakeRunner({"efsmi": answer})
    assert EnflameDetector(no_numa).detect(runner) == []
    assert runner.command_lines() == ["efsmi -q", "efsmi"]
