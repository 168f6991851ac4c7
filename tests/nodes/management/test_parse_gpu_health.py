import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.agent.health.test_readers import EXPECTED, FIXTURES, VENDOR_OF_DIRECTORY


def run(vendor: str, path) -> dict:
    out = StringIO()
    call_command("parse_gpu_health", vendor, str(path), stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prints_the_verdict_cards_and_errors_of_every_capture(name):
    printed = run(VENDOR_OF_DIRECTORY[name.split("/")[0]], FIXTURES / name)
    assert printed["verdict"] == EXPECTED[name][0]
    assert len(printed["cards"]) == EXPECTED[name][1]
    assert set(printed) == {"verdict", "cards", "errors"}
    assert all({"index", "health", "errors"} <= set(card) for card in printed["cards"])


def test_an_ascend_warning_names_the_card_and_the_tool_failure_is_failed():
    ascend = FIXTURES / "ascend"
    printed = run("ascend", ascend / "npu-smi_info__atlas800-9010_8npu_24.1.RC2_2-warning__faulty.txt")
    assert [card["index"] for card in printed["cards"] if card["health"] == "degraded"] == [3, 7]
    failure = run("ascend", ascend / "npu-smi_info__container_dcmi-init-failed-8005__faulty.txt")
    assert failure == {"verdict": "failed", "cards": [], "errors": [
        {"code": "tool-failure", "message": "dcmi module initialize failed. ret is -8005", "at": None}]}


def test_output_it_cannot_read_is_an_error_and_a_missing_file_too(tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("hello\n")
    with pytest.raises(CommandError, match="not understood as hygon"):
        run("hygon", other)
    with pytest.raises(CommandError, match="cannot read"):
        run("nvidia", tmp_path / "missing.txt")
