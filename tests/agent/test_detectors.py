import subprocess

import pytest

from nodes.agent.detectors import (
    DETECTOR_CLASSES, GPU_TYPES, Card, SimulatedDetector, default_detectors, detect_all, fake_cards_for,
)
from nodes.agent.detectors.ascend import AscendDetector, parse_npu_smi_info
from nodes.agent.detectors.base import canonical_bus_id, no_numa, sysfs_numa_node
from nodes.agent.detectors.biren import BirenDetector
from nodes.agent.detectors.cambricon import CambriconDetector
from nodes.agent.detectors.enflame import EnflameDetector
from nodes.agent.detectors.hygon import HygonDetector
from nodes.agent.detectors.iluvatar import IluvatarDetector
from nodes.agent.detectors.kunlun import KunlunDetector
from nodes.agent.detectors.metax import MetaxDetector
from nodes.agent.detectors.musa import MusaDetector
from nodes.agent.detectors.nvidia import NvidiaDetector, parse_query_gpu_csv
from scheduling.framework.gpu_models import model_matches

from .detectors.fakes import FakeRunner, capture

EXECUTABLES = ["nvidia-smi", "ixsmi", "npu-smi", "mthreads-gmi", "hy-smi", "rocm-smi", "mx-smi", "efsmi", "brsmi",
               "cnmon", "xpu_smi", "xpu-smi"]


def on_a_host_with_its_cards(detector_class):
    """The detector as it runs on a host that has the vendor's hardware (Kunlunxin checks the PCI bus first)."""
    if detector_class is KunlunDetector:
        return KunlunDetector(no_numa, vendor_present=lambda vendor_id: True)
    return detector_class(no_numa)


def summary(cards: list[Card]) -> list[tuple]:
    return [(c.index, c.type, c.model, c.memory_total_mb, c.memory_used_mb, c.utilization, c.temperature)
            for c in cards]


def test_priority_order_is_the_specified_one():
    assert GPU_TYPES == ("musa", "hygon", "cambricon", "biren", "ascend", "kunlun", "iluvatar", "nvidia", "metax",
                         "enflame")
    assert [detector.gpu_type for detector in default_detectors()] == list(GPU_TYPES)


def test_nvidia_query_with_header_and_units(fixture_text):
    runner = FakeRunner({"nvidia-smi": fixture_text("nvidia/query-gpu-h200-4gpu-header-units.txt")})
    cards = NvidiaDetector(no_numa).detect(runner)
    assert summary(cards) == [
        (0, "nvidia", "NVIDIA H200-141C", 144384, 45662, None, None),
        (1, "nvidia", "NVIDIA H200-141C", 144384, 131470, None, None),
        (2, "nvidia", "NVIDIA H200-141C", 144384, 137255, None, None),
        (3, "nvidia", "NVIDIA H200-141C", 144384, 111082, None, None),
    ]
    assert cards[0].uuid == "GPU-78aaaccb-3af1-11b3-b1f8-3828c251d9f2"
    assert runner.calls == [["nvidia-smi",
                             "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu,"
                             "pci.bus_id", "--format=csv,noheader,nounits"]]


def test_nvidia_query_in_the_agents_own_format_resolves_numa_by_bus_id():
    output = ("0, GPU-aaaa, NVIDIA A100-SXM4-80GB, 81920, 1024, 37, 41, 00000000:07:00.0\n"
              "1, GPU-bbbb, NVIDIA A100-SXM4-80GB, 81920, [N/A], [N/A], 39, 00000000:0F:00.0\n")
    numa = {"0000:07:00.0": 3, "0000:0f:00.0": 1}
    cards = NvidiaDetector(lambda bus: numa.get(canonical_bus_id(bus))).detect(FakeRunner({"nvidia-smi": output}))
    assert summary(cards) == [(0, "nvidia", "NVIDIA A100-SXM4-80GB", 81920, 1024, 37, 41),
                              (1, "nvidia", "NVIDIA A100-SXM4-80GB", 81920, None, None, 39)]
    assert [card.numa for card in cards] == [3, 1]


def test_iluvatar_ixsmi_output(fixture_text):
    fields = ("index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu")
    cards = parse_query_gpu_csv(fixture_text("iluvatar/ixsmi-query-gpu-noheader-units.txt"), "iluvatar", fields)
    assert summary(cards) == [(0, "iluvatar", "Iluvatar MR-V50", 16384, 116, 0, 30),
                              (1, "iluvatar", "Iluvatar MR-V100", 32768, 27996, 0, 36)]
    assert cards[0].uuid == "iluvatar-0"


def test_iluvatar_detector_runs_ixsmi_with_the_nvidia_query():
    runner = FakeRunner({"ixsmi": "0, GPU-1f2e, Iluvatar BI-V150, 32768, 64, 3, 60, 00000001:01:00.0\n"})
    assert summary(IluvatarDetector(no_numa).detect(runner)) == [(0, "iluvatar", "Iluvatar BI-V150", 32768, 64, 3, 60)]
    assert runner.calls[0][0] == "ixsmi" and runner.calls[0][2] == "--format=csv,noheader,nounits"


def test_ascend_910b_without_phy_id(fixture_text):
    runner = FakeRunner({"npu-smi": fixture_text("ascend/npu-smi-info-910b4-1-hami.txt")})
    cards = AscendDetector(no_numa).detect(runner)
    assert summary(cards) == [(0, "ascend", "910B4-1", 65536, 3197, 0, 33),
                              (1, "ascend", "910B4-1", 65536, 3197, 0, 32)]
    assert runner.calls == [["npu-smi", "info"]]


def test_ascend_two_chips_per_npu_are_indexed_by_phy_id(fixture_text):
    cards = AscendDetector(no_numa).detect(
        FakeRunner({"npu-smi": fixture_text("ascend/npu-smi-info-ascend910-2chip-vllm-ascend.txt")}))
    assert summary(cards) == [(0, "ascend", "Ascend910", 65536, 3143, 0, 36),
                              (1, "ascend", "Ascend910", 65536, 2887, 0, 36),
                              (2, "ascend", "Ascend910", 65536, 3141, 0, 35)]
    assert cards[2].uuid == "ascend-0000:99:00.0"


def test_ascend_process_table_is_not_read_as_cards(fixture_text):
    text = fixture_text("ascend/npu-smi-info-910b4-1-hami.txt") + (
        "+===========================+===============+====================================================+\n"
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "+===========================+===============+====================================================+\n"
        "| 0       0                 | 2127          | python3                  | 61234                   |\n"
    )
    assert len(parse_npu_smi_info(text)) == 2


@pytest.mark.parametrize(("fixture", "expected"), [
    ("musa/mthreads-gmi-s4000-gpustack.txt",
     [(0, "musa", "MTT S4000", 49152, 0, 0, 44), (1, "musa", "MTT S4000", 49152, 0, 0, 44)]),
    ("musa/mthreads-gmi-s5000-vllm-omni.txt",
     [(0, "musa", "MTT S5000", 81920, 66641, 0, 52), (1, "musa", "MTT S5000", 81920, 64889, 0, 51)]),
])
def test_musa_mthreads_gmi(fixture_text, fixture, expected):
    runner = FakeRunner({"mthreads-gmi": fixture_text(fixture)})
    cards = MusaDetector(no_numa).detect(runner)
    assert summary(cards) == expected
    assert cards[0].uuid.startswith("musa-0000:")


@pytest.mark.parametrize(("fixture", "expected"), [
    ("hygon/hy-smi-json-z100l-dcu.json", [(0, "hygon", "Z100L", 32752, 2, 0, 41)]),
    ("hygon/hy-smi-json-k100-ai-hcu.json", [(0, "hygon", "K100_AI", 65520, 2, 0, 35)]),
    ("hygon/rocm-smi-json-amd-radeon.json", []),
])
def test_hygon_json(fixture_text, fixture, expected):
    assert summary(HygonDetector(no_numa).detect(FakeRunner({"hy-smi": fixture_text(fixture)}))) == expected


def test_hygon_falls_back_to_dtk_rocm_smi(fixture_text):
    runner = FakeRunner({"rocm-smi": fixture_text("hygon/hy-smi-json-z100l-dcu.json")})
    assert summary(HygonDetector(no_numa).detect(runner)) == [(0, "hygon", "Z100L", 32752, 2, 0, 41)]
    assert [call[0] for call in runner.calls] == ["hy-smi", "rocm-smi"]


def test_metax_old_gpu_name_layout(fixture_text):
    runner = FakeRunner({"mx-smi": fixture_text("metax/mx-smi-2.1.12-8xc500-qwen3-smvl.txt")})
    cards = MetaxDetector(no_numa).detect(runner)
    assert len(cards) == 8
    assert summary(cards)[0] == (0, "metax", "MetaX C500", 65536, 5680, 0, 36)
    assert summary(cards)[3] == (3, "metax", "MetaX C500", 65536, 4986, 1, 37)
    assert cards[7].uuid == "metax-0000:38:00.0"


def test_metax_new_board_layout(fixture_text):
    runner = FakeRunner({"mx-smi": fixture_text("metax/mx-smi-2.3.1-c500-board-layout.txt")})
    cards = MetaxDetector(no_numa).detect(runner)
    assert summary(cards) == [(0, "metax", "MetaX C500", 65536, 826, 0, 32)]


def test_two_vendors_present_are_reported_in_priority_order(fixture_text):
    # nvidia-smi answers first in dict order, yet musa outranks nvidia.
    runner = FakeRunner({
        "nvidia-smi": fixture_text("nvidia/query-gpu-h200-4gpu-header-units.txt"),
        "mthreads-gmi": fixture_text("musa/mthreads-gmi-s4000-gpustack.txt"),
    })
    cards = detect_all(runner, default_detectors(no_numa))
    assert [card.type for card in cards] == ["musa"] * 2 + ["nvidia"] * 4
    assert [call[0] for call in runner.calls][:2] == ["mthreads-gmi", "hy-smi"]


@pytest.mark.parametrize("failure", [
    FileNotFoundError(2, "No such file or directory"),
    PermissionError(13, "Permission denied"),
    subprocess.CalledProcessError(9, ["npu-smi"], stderr="dcmi module initialize failed"),
    subprocess.TimeoutExpired(["npu-smi"], 15),
])
@pytest.mark.parametrize("detector_class", DETECTOR_CLASSES)
def test_missing_or_failing_cli_means_no_cards(detector_class, failure):
    runner = FakeRunner({name: failure for name in EXECUTABLES})
    assert on_a_host_with_its_cards(detector_class).detect(runner) == []
    assert [" ".join(call) for call in runner.calls] == [" ".join(argv) for argv in detector_class.commands]


@pytest.mark.parametrize("detector_class", DETECTOR_CLASSES)
@pytest.mark.parametrize("output", ["", "garbage\nmore garbage | x | y\n", "{not json", "0, 1, 2\n"])
def test_unparsable_output_means_no_cards(detector_class, output):
    runner = FakeRunner({name: output for name in EXECUTABLES})
    assert on_a_host_with_its_cards(detector_class).detect(runner) == []
    assert len(runner.calls) == len(detector_class.commands)


def test_nothing_installed_means_no_cards():
    assert detect_all(FakeRunner({}), default_detectors(no_numa)) == []


def test_sysfs_numa_lookup(tmp_path):
    (tmp_path / "0000:07:00.0").mkdir()
    (tmp_path / "0000:07:00.0" / "numa_node").write_text("3\n")
    (tmp_path / "0000:0f:00.0").mkdir()
    (tmp_path / "0000:0f:00.0" / "numa_node").write_text("-1\n")
    assert sysfs_numa_node("00000000:07:00.0", tmp_path) == 3
    assert sysfs_numa_node("0000:0F:00.0", tmp_path) is None
    assert sysfs_numa_node("0000:99:00.0", tmp_path) is None
    assert sysfs_numa_node("0000:xx:00.0", tmp_path) is None


def test_fake_cards_for_and_simulated_detector():
    cards = fake_cards_for("ascend", "910B3", 4, 65536, [0, 0, 1, 1])
    assert [(c.index, c.type, c.model, c.memory_total_mb, c.memory_used_mb, c.numa) for c in cards] == [
        (0, "ascend", "910B3", 65536, 0, 0), (1, "ascend", "910B3", 65536, 0, 0),
        (2, "ascend", "910B3", 65536, 0, 1), (3, "ascend", "910B3", 65536, 0, 1)]
    assert len({card.uuid for card in cards}) == 4
    assert [card.numa for card in fake_cards_for("nvidia", "A100", 2, 81920)] == [None, None]
    with pytest.raises(ValueError):
        fake_cards_for("nvidia", "A100", 2, 81920, [0])
    assert detect_all(FakeRunner({}), [SimulatedDetector(cards)]) == cards


@pytest.mark.parametrize(("detector_class", "vendor", "capture_name", "pattern"), [
    (CambriconDetector, "cambricon", "cnmon__mlu370-x8_2card_v5.10.13.txt", "MLU370"),
    (CambriconDetector, "cambricon", "cnmon__mlu370-x4_3card_v4.20.11.txt", "MLU370-X4"),
    (KunlunDetector, "kunlunxin", "xpu_smi__p800-oam_8dev_5.0.21.21.txt", "P800"),
    (KunlunDetector, "kunlunxin", "xpu_smi__r300_2dev_rt4.31_sn-redacted.txt", "R300"),
    (EnflameDetector, "enflame", "efsmi__l300_1card_1.7.2.14.txt", "L300"),
    (EnflameDetector, "enflame", "efsmi__s60_2card_1.2.0.301.txt", "S60"),
    (BirenDetector, "biren", "brsmi__biren106b_1gpu_1.11.0.txt", "biren106b"),
])
def test_models_keep_the_name_the_tool_prints_so_gpu_model_patterns_match(detector_class, vendor, capture_name,
                                                                          pattern):
    cards = detector_class(no_numa).parse(capture(vendor, capture_name))
    assert cards and all(model_matches(pattern, card.model) for card in cards)
    assert not any(model_matches("MLU290|P900|T20", card.model) for card in cards)
