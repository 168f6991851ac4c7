import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.agent.detectors import test_biren, test_cambricon, test_enflame, test_kunlun
from tests.agent.detectors.fakes import CAPTURES

EXPECTED = {
    ("cambricon", "cambricon"): test_cambricon.CAPTURES,
    ("kunlun", "kunlunxin"): test_kunlun.CAPTURES,
    ("enflame", "enflame"): test_enflame.CAPTURES,
    ("biren", "biren"): test_biren.CAPTURES,
}
READINGS = ["index", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature"]


def run(vendor, path) -> tuple[list[dict], str]:
    out, err = StringIO(), StringIO()
    call_command("parse_gpu_output", vendor, str(path), stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize(("vendor", "directory", "name", "expected"), [
    (vendor, directory, name, expected)
    for (vendor, directory), captures in EXPECTED.items() for name, expected in captures.items()
])
def test_prints_the_cards_of_every_capture_as_the_agent_reads_them(vendor, directory, name, expected):
    cards, errors = run(vendor, CAPTURES / directory / name)
    assert cards == [dict(zip(READINGS, reading, strict=True)) for reading in expected]
    assert errors == ""


def test_output_is_a_json_list_with_null_for_what_the_tool_did_not_print():
    cards, _ = run("kunlun", CAPTURES / "kunlunxin" / "xpu_smi__r300_2dev_rt4.31_sn-redacted.txt")
    assert cards == [
        {"index": 0, "model": "R300", "memory_total_mb": 32768, "memory_used_mb": 0, "utilization": 0,
         "temperature": None},
        {"index": 1, "model": "R300", "memory_total_mb": 32768, "memory_used_mb": 0, "utilization": 0,
         "temperature": None},
    ]


def test_other_vendors_are_read_by_their_own_detector(tmp_path):
    saved = tmp_path / "nvidia-smi.csv"
    saved.write_text("0, GPU-aaaa, NVIDIA A100-SXM4-80GB, 81920, [N/A], [N/A], 39, 00000000:07:00.0\n")
    assert run("nvidia", saved)[0] == [{"index": 0, "model": "NVIDIA A100-SXM4-80GB", "memory_total_mb": 81920,
                                        "memory_used_mb": None, "utilization": None, "temperature": 39}]
    # The same file is no Cambricon output.
    assert run("cambricon", saved)[0] == []


def test_output_the_agent_cannot_read_means_no_cards_and_says_why(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello | world |\n")
    cards, errors = run("biren", junk)
    assert cards == []
    assert "not understood as biren output" in errors


def test_an_unknown_vendor_or_an_unreadable_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="invalid choice: 'amd'"):
        run("amd", CAPTURES / "biren" / test_biren.BRSMI)
    with pytest.raises(CommandError, match="cannot read"):
        run("biren", tmp_path / "missing.txt")
