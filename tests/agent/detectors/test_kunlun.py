import subprocess

import pytest

from nodes.agent.detectors.base import no_numa
from nodes.agent.detectors.kunlun import KunlunDetector

from .fakes import FakeRunner, capture, capture_names, readings

MACHINE_K200 = "xpu_smi_-m__k200_4dev_4.33.txt"
TABLE_K200_IDLE = "xpu_smi__k200_4dev_4.33_idle.txt"
TABLE_K200_BUSY = "xpu_smi__k200_4dev_4.33_busy-with-processes.txt"
TABLE_K200_WIDE = "xpu_smi__k200_4dev_rt4.0_state-power-cols.txt"
TABLE_K200_SHORT = "xpu_smi__k200_4dev_rt4.0_x86_64.txt"
TABLE_R300 = "xpu_smi__r300_2dev_rt4.31_sn-redacted.txt"
TABLE_P800 = "xpu_smi__p800-oam_8dev_5.0.21.21.txt"
QUERY_P800 = "xpu-smi_-q_--id=0__p800-pcie_5.0.21.26.dedented-from-docstring.txt"

K200_IDLE = [(0, "K200", 8064, 0, 0, 37), (1, "K200", 8064, 0, 0, 37), (2, "K200", 8064, 0, 0, 38),
             (3, "K200", 8064, 0, 0, 36)]
P800_TEMPERATURES = [37, 41, 36, 36, 40, 40, 39, 40]
# The XRE 4.0 short layout and the R300 one print no temperature.
CAPTURES = {
    MACHINE_K200: K200_IDLE,
    TABLE_K200_IDLE: K200_IDLE,
    TABLE_K200_BUSY: [(0, "K200", 8064, 3, 3, 37), (1, "K200", 8064, 1, 3, 37), (2, "K200", 8064, 3, 4, 38),
                      (3, "K200", 8064, 1025, 4, 36)],
    TABLE_K200_WIDE: [(0, "K200", 8064, 0, 0, 41), (1, "K200", 8064, 0, 0, 39), (2, "K200", 8064, 0, 0, 39),
                      (3, "K200", 8064, 0, 0, 39)],
    TABLE_K200_SHORT: [(0, "K200", 8064, 504, 0, None), (1, "K200", 8064, 504, 0, None),
                       (2, "K200", 8064, 0, 0, None), (3, "K200", 8064, 0, 0, None)],
    TABLE_R300: [(0, "R300", 32768, 0, 0, None), (1, "R300", 32768, 0, 0, None)],
    TABLE_P800: [(index, "P800 OAM", 98304, 0, 0, temperature) for index, temperature in enumerate(P800_TEMPERATURES)],
    QUERY_P800: [(0, "P800 PCIe", 98304, 0, 0, 46)],
}
ALL_COMMANDS = ["xpu_smi -m", "xpu_smi", "xpu-smi -m", "xpu-smi"]


def kunlun(numa_lookup=no_numa, present=True) -> KunlunDetector:
    return KunlunDetector(numa_lookup, vendor_present=lambda vendor_id: present and vendor_id == "0x1d22")


def test_every_kunlunxin_capture_has_its_expected_cards():
    assert capture_names("kunlunxin") == set(CAPTURES)


@pytest.mark.parametrize(("name", "expected"), CAPTURES.items())
def test_xpu_smi_capture_is_read_as_the_cards_it_shows(name, expected):
    cards = kunlun().parse(capture("kunlunxin", name))
    assert readings(cards) == expected
    assert {card.type for card in cards} == {"kunlun"}


@pytest.mark.parametrize("name", [TABLE_K200_IDLE, TABLE_K200_BUSY, TABLE_K200_WIDE, TABLE_K200_SHORT, TABLE_R300,
                                  TABLE_P800])
def test_the_default_table_is_the_fallback_when_machine_mode_fails(name):
    runner = FakeRunner({"xpu_smi -m": subprocess.CalledProcessError(1, ["xpu_smi", "-m"]),
                         "xpu_smi": capture("kunlunxin", name)})
    assert readings(kunlun().detect(runner)) == CAPTURES[name]
    assert runner.command_lines() == ["xpu_smi -m", "xpu_smi"]


def test_machine_mode_comes_first_and_the_table_is_not_run_when_it_answers():
    runner = FakeRunner({"xpu_smi -m": capture("kunlunxin", MACHINE_K200),
                         "xpu_smi": capture("kunlunxin", TABLE_K200_BUSY)})
    assert readings(kunlun().detect(runner)) == K200_IDLE
    assert runner.command_lines() == ["xpu_smi -m"]


def test_xpu_smi_missing_then_xpu_dash_smi_is_tried_machine_mode_first():
    runner = FakeRunner({"xpu-smi -m": "", "xpu-smi": capture("kunlunxin", TABLE_P800)})
    assert len(kunlun().detect(runner)) == 8
    assert runner.command_lines() == ALL_COMMANDS


def test_nothing_is_run_without_a_kunlunxin_pci_device_so_intels_xpu_smi_is_never_believed():
    runner = FakeRunner({"xpu-smi": capture("kunlunxin", TABLE_P800)})
    assert kunlun(present=False).detect(runner) == []
    assert runner.calls == []


def test_intels_xpu_smi_on_a_kunlunxin_host_gives_no_kunlunxin_cards():
    intel_usage = ("Intel XPU System Management Interface -- v1.2\n"
                   "Usage: xpu-smi [Options]\n  xpu-smi discovery\n  xpu-smi stats -d [deviceId]\n")
    runner = FakeRunner({"xpu-smi": intel_usage})
    assert kunlun().detect(runner) == []
    assert runner.command_lines() == ALL_COMMANDS


def test_machine_mode_and_table_give_each_die_of_a_k200_its_own_stable_id():
    by_machine = kunlun().parse(capture("kunlunxin", MACHINE_K200))
    by_table = kunlun().parse(capture("kunlunxin", TABLE_K200_IDLE))
    assert [card.uuid for card in by_machine] == [card.uuid for card in by_table] == [
        "kunlun-0000:43:00.0", "kunlun-0000:43:00.0-1", "kunlun-0000:44:00.0", "kunlun-0000:44:00.0-1"]


def test_machine_mode_reads_a_quoted_model_and_places_the_card_by_its_pci_address():
    # XRE 5 quotes a model with a space in it: `"P800 OAM"` where XRE 4.33 prints `K200`.
    line = capture("kunlunxin", MACHINE_K200).splitlines()[2].replace(" K200 ", ' "P800 OAM" ')
    cards = kunlun(numa_lookup=lambda bus_id: 1 if bus_id == "0000:44:00.0" else None).parse(line + "\n")
    assert readings(cards) == [(2, "P800 OAM", 8064, 0, 0, 38)]
    assert cards[0].numa == 1


def test_unavailable_readings_are_unknown_not_a_failure():
    text = capture("kunlunxin", TABLE_K200_WIDE).replace("|     0 % | 0 / 16 MB | 0 / 8064 MB |       37 |   41 |",
                                                         "|   N/A % | 0 / 16 MB | N/A / 8064 MB |  N/A |  N/A |")
    assert readings(kunlun().parse(text))[0] == (0, "K200", 8064, None, None, None)


@pytest.mark.parametrize("answer", [
    FileNotFoundError(2, "No such file or directory"),
    PermissionError(13, "Permission denied"),
    subprocess.CalledProcessError(1, ["xpu_smi"], stderr="xpu device not found"),
    subprocess.TimeoutExpired(["xpu_smi"], 15),
    "",
    "garbage\nmore garbage | x | y\n",
    "0000:43:00.0 0 0\n",
])
def test_missing_failing_or_unreadable_xpu_smi_means_no_kunlunxin_cards(answer):
    runner = FakeRunner({"xpu_smi": answer, "xpu-smi": answer})
    assert kunlun().detect(runner) == []
    assert runner.command_lines() == ALL_COMMANDS
