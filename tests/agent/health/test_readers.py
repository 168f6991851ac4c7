"""Every published health capture (tests/fixtures/vendor-health) reads as the verdict its content calls for.

The eight vendors other than NVIDIA and Ascend published healthy output only; their faulty branches are checked on
the real capture with one counter or state changed (the layout stays the published one), as the README says.
"""

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodes.agent.health import READER_FOR_TYPE, HealthReport
from nodes.agent.health.nvidia import NvidiaHealthReader
from tests.agent.detectors.fakes import FakeRunner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vendor-health"
VENDOR_OF_DIRECTORY = {"nvidia": "nvidia", "ascend": "ascend", "moorethreads": "musa", "hygon": "hygon",
                       "metax": "metax", "enflame": "enflame", "iluvatar": "iluvatar", "biren": "biren",
                       "cambricon": "cambricon", "kunlunxin": "kunlun"}

# file → (verdict, {card index: health} for the cards not ok, error codes expected somewhere in the report)
EXPECTED = {
    "nvidia/nvidia-smi_-q__h100-80gb-hbm3_8gpu_535.161.08__healthy.txt": ("ok", 8, {}, set()),
    "nvidia/nvidia-smi_-q__a10_535.129.03_remapped-rows-pending__faulty.txt":
        ("degraded", 1, {0: "degraded"}, {"row-remap-pending"}),
    "nvidia/nvidia-smi_-q_-x__v100-sxm3-32gb_410.104_dbe-retired-pages-pending__faulty.txt":
        ("failed", 1, {0: "failed"}, {"ecc-uncorrectable", "page-retirement-pending"}),
    "nvidia/dmesg_--time-format=iso__xid-48-63-94_dbe-row-remap-contained__faulty.txt":
        ("failed", 1, {None: "failed"}, {"xid-48", "xid-63", "xid-94"}),
    "nvidia/dmesg__gpu-0000-b3-fallen-off-the-bus_570.158.01__faulty.txt":
        ("failed", 1, {None: "failed"}, {"fallen-off-the-bus"}),
    "nvidia/nvidia-smi_--query-gpu__h100-80gb-hbm3_590.48.01__healthy.txt": ("ok", 1, {}, set()),
    "nvidia/nvidia-smi_-q_ecc-section-excerpt__sram-uncorrectable__faulty.txt":
        ("failed", 1, {None: "failed"}, {"ecc-uncorrectable"}),
    "nvidia/nvidia-smi__driver-library-version-mismatch_535.161__faulty.txt": ("failed", 0, {}, {"tool-failure"}),
    "ascend/npu-smi_info__910b2c_2npu_23.0.3__healthy.txt": ("ok", 2, {}, set()),
    "ascend/npu-smi_info__atlas800-9010_8npu_24.1.RC2_2-warning__faulty.txt":
        ("degraded", 8, {3: "degraded", 7: "degraded"}, {"health-warning"}),
    "ascend/npu-smi_info_-i_0_-c_0_-t_health__910a_chip0__healthy.txt": ("ok", 1, {}, set()),
    "ascend/npu-smi_info_-i_1_-t_ecc__doc-example_ddr-hbm-ecc-zero__healthy.txt": ("ok", 1, {}, set()),
    "ascend/npu-smi_info__container_dcmi-init-failed-8005__faulty.txt": ("failed", 0, {}, {"tool-failure"}),
    "moorethreads/mthreads-gmi__mtt-s80_1gpu_1.14.0_ecc-mode-na__healthy.txt": ("ok", 1, {}, set()),
    "moorethreads/mthreads-gmi__mtt-s5000_8gpu_2.4.1_ecc-mode-on-die-edc__healthy.txt": ("ok", 8, {}, set()),
    "hygon/hy-smi__k100-ai_4dcu_dtk24.04.1_mode-normal__healthy.txt": ("ok", 4, {}, set()),
    "metax/mx-smi_--count-ecc__mxc500-sgpu_2.2.12__healthy.txt": ("ok", 1, {}, set()),
    "metax/mx-smi_-j__mxc500-sgpu_2.2.12_ras-count-empty__healthy.txt": ("ok", 1, {}, set()),
    "metax/mx-smi__mxc500-sgpu_2.2.12_gpu-state-available__healthy.txt": ("ok", 1, {}, set()),
    "iluvatar/ixsmi_-q_-x__mr-v100_2gpu_4.2.0__healthy.txt": ("ok", 2, {}, set()),
    "biren/brsmi__biren106b_1gpu_1.11.0_ecc-0__healthy.txt": ("ok", 1, {}, set()),
    "cambricon/cnmon__mluxxx-xx-redacted_8card_v5.10.31_ecc-error-0__healthy.txt": ("ok", 8, {}, set()),
    "cambricon/cnmon__mlu370-x8_2card_v5.10.13_ecc-error-na__healthy.txt": ("ok", 2, {}, set()),
    "kunlunxin/xpu-smi_-q_--id__p800-pcie_5.0.21.26_ecc-errors-0_docstring-indented__healthy.txt":
        ("ok", 1, {}, set()),
    "kunlunxin/xpu_smi__p800-oam_8dev_5.0.21.21_uncorr-ecc-0__healthy.txt": ("ok", 8, {}, set()),
    "kunlunxin/xpu_smi__k200_4dev_4.33_state-n__healthy.txt": ("ok", 4, {}, set()),
    "enflame/efsmi_-q__s60_10dev_1.5.20260710_health-true__healthy.txt": ("ok", 10, {}, set()),
}


def text_of(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def parse(name: str, text: str | None = None) -> HealthReport:
    return READER_FOR_TYPE[VENDOR_OF_DIRECTORY[name.split("/")[0]]]().parse(text_of(name) if text is None else text)


def codes(report: HealthReport) -> set[str]:
    return {error.code for card in report.cards for error in card.errors} | {error.code for error in report.errors}


def test_every_capture_has_its_expectation():
    assert {f"{path.parent.name}/{path.name}" for path in FIXTURES.glob("*/*.txt")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_capture_reads_as_its_verdict(name):
    verdict, cards, unhealthy, expected_codes = EXPECTED[name]
    report = parse(name)
    assert report.verdict == verdict
    assert len(report.cards) == cards
    assert {card.index: card.health for card in report.cards if card.health != "ok"} == unhealthy
    assert expected_codes <= codes(report)


def test_kernel_log_keeps_the_time_and_ignores_unrelated_lines():
    report = parse("nvidia/dmesg_--time-format=iso__xid-48-63-94_dbe-row-remap-contained__faulty.txt")
    (card,) = report.cards
    assert card.bus_id == "0000:19:00.0"
    assert [error.code for error in card.errors] == ["xid-48", "xid-63"] + ["xid-94"] * 9
    assert card.errors[0].at == "2024-11-15T12:02:03+00:00"


def test_an_uncorrectable_error_only_in_the_lifetime_counters_is_degraded():
    text = text_of("nvidia/nvidia-smi_-q_ecc-section-excerpt__sram-uncorrectable__faulty.txt").replace(
        "SRAM Uncorrectable            : 1", "SRAM Uncorrectable            : 0")
    assert parse("nvidia/x", text).verdict == "degraded"


def test_a_kernel_log_event_joins_the_card_of_its_address():
    h100 = text_of("nvidia/nvidia-smi_-q__h100-80gb-hbm3_8gpu_535.161.08__healthy.txt")
    xid = text_of("nvidia/dmesg_--time-format=iso__xid-48-63-94_dbe-row-remap-contained__faulty.txt")
    runner = FakeRunner({"nvidia-smi -q": h100, "dmesg --time-format=iso": xid})
    report = NvidiaHealthReader(now=lambda: datetime(2024, 11, 15, 12, 30, tzinfo=UTC)).read(runner)
    # PCI:0000:19:00 is the first H100 of the -q capture (GPU 00000000:19:00.0).
    assert {card.index: card.health for card in report.cards if card.health != "ok"} == {0: "failed"}
    assert report.errors == ()


def test_an_unreadable_kernel_log_is_no_failure_but_an_unreachable_tool_is():
    h100 = text_of("nvidia/nvidia-smi_-q__h100-80gb-hbm3_8gpu_535.161.08__healthy.txt")
    fine = NvidiaHealthReader().read(FakeRunner({"nvidia-smi -q": h100, "dmesg": PermissionError("dmesg")}))
    assert fine.verdict == "ok"
    broken = NvidiaHealthReader().read(FakeRunner({"nvidia-smi": subprocess.CalledProcessError(
        18, ["nvidia-smi", "-q"], output="Failed to initialize NVML: Driver/library version mismatch\n")}))
    assert broken.verdict == "failed"
    assert broken.for_card(3).health == "failed"
    assert "Driver/library version mismatch" in broken.for_card(3).errors[0].message
    missing = READER_FOR_TYPE["hygon"]().read(FakeRunner({}))
    assert missing.verdict == "failed"


# Faulty branches of the vendors that published healthy output only: the real layout, one value changed.
CHANGED = [
    ("biren/brsmi__biren106b_1gpu_1.11.0_ecc-0__healthy.txt",
     "|                       0 |", "|                       2 |", {0: "failed"}),
    ("cambricon/cnmon__mlu370-x8_2card_v5.10.13_ecc-error-na__healthy.txt",
     "| 0%                N/A |\n|  0%   32C", "| 0%                  3 |\n|  0%   32C", {0: "degraded"}),
    ("kunlunxin/xpu_smi__p800-oam_8dev_5.0.21.21_uncorr-ecc-0__healthy.txt",
     "|   2  P800 OAM           N/A   | 00000000:63:00.0 N/A |                    0 |",
     "|   2  P800 OAM           N/A   | 00000000:63:00.0 N/A |                    1 |", {2: "failed"}),
    ("enflame/efsmi_-q__s60_10dev_1.5.20260710_health-true__healthy.txt",
     "Health                  : True", "Health                  : False", {0: "failed"}),
    ("metax/mx-smi__mxc500-sgpu_2.2.12_gpu-state-available__healthy.txt",
     "| Available            |", "| Unavailable          |", {0: "failed"}),
    ("metax/mx-smi_--count-ecc__mxc500-sgpu_2.2.12__healthy.txt",
     "DRAM Uncorrectable                        : 0", "DRAM Uncorrectable                        : 1", {0: "failed"}),
    ("iluvatar/ixsmi_-q_-x__mr-v100_2gpu_4.2.0__healthy.txt",
     "<double_bit>0</double_bit>", "<double_bit>2</double_bit>", {0: "failed"}),
    ("kunlunxin/xpu-smi_-q_--id__p800-pcie_5.0.21.26_ecc-errors-0_docstring-indented__healthy.txt",
     "DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 3", {0: "failed"}),
]


@pytest.mark.parametrize(("name", "old", "new", "unhealthy"), CHANGED, ids=[case[0] for case in CHANGED])
def test_a_fault_in_the_published_layout_is_read(name, old, new, unhealthy):
    text = text_of(name)
    assert old in text
    report = parse(name, text.replace(old, new, 1))
    assert {card.index: card.health for card in report.cards if card.health != "ok"} == unhealthy


def test_kernel_log_events_older_than_the_window_no_longer_count():
    log = text_of("nvidia/dmesg_--time-format=iso__xid-48-63-94_dbe-row-remap-contained__faulty.txt")
    report = NvidiaHealthReader().parse(log)
    just_after = NvidiaHealthReader(now=lambda: datetime(2024, 11, 15, 12, 30, tzinfo=UTC))
    assert just_after.recent(report).verdict == "failed"
    later = NvidiaHealthReader(now=lambda: datetime(2024, 11, 15, 14, 0, tzinfo=UTC))
    assert later.recent(report).cards == ()


def test_broken_xml_is_output_not_understood_never_a_crash():
    for vendor in ("nvidia", "iluvatar"):
        text = "<?xml version='1.0'?><nvidia_smi_log><gpu id='x'>" if vendor == "nvidia" else "<nvidia_smi_log><gpu>"
        with pytest.raises(ValueError):
            READER_FOR_TYPE[vendor]().parse(text)
