import pytest

from nodes.agent.detectors.tables import read_device_table

from .fakes import capture

HEADER = ("card", "name", "memory-usage")


def test_values_belong_to_the_header_label_above_them_wherever_it_is_aligned():
    devices = read_device_table(capture("cambricon", "cnmon__mlu370-x8_2card_v5.10.13.txt"), HEADER)
    assert devices[1] == {
        "card": "1", "vf": "/", "name": "MLU370-X8", "firmware": "v1.1.6", "bus-id": "0000:3D:00.0", "util": "0%",
        "ecc-error": "N/A", "fan": "0%", "temp": "39C", "pwr:usage/cap": "106 W/ 250 W",
        "memory-usage": "0 MiB/ 23374 MiB", "sr-iov": "N/A", "compute-mode": "Default",
    }


def test_a_label_may_hold_single_spaces_and_a_value_several_words():
    device, = read_device_table(capture("biren", "brsmi__biren106b_1gpu_1.11.0.txt"), ("gpu", "name"))
    assert (device["volatile uncorr. ecc"], device["compute m."], device["svi m."]) == ("0", "Default", "Disabled")
    p800 = read_device_table(capture("kunlunxin", "xpu_smi__p800-oam_8dev_5.0.21.21.txt"), ("xpu", "name"))
    assert (p800[0]["name"], p800[0]["persistence-m"], p800[0]["bus-id"], p800[0]["l3-usage"]) == (
        "P800 OAM", "N/A", "00000000:03:00.0", "0MiB / 96MiB")


def test_one_row_headers_take_one_row_per_device_and_the_table_ends_at_the_next_box():
    devices = read_device_table(capture("kunlunxin", "xpu_smi__k200_4dev_4.33_busy-with-processes.txt"),
                                ("devid", "model", "memory"))
    assert [device["memory"] for device in devices] == ["3 / 8064 MB", "1 / 8064 MB", "3 / 8064 MB", "1025 / 8064 MB"]


def test_no_header_is_an_error():
    with pytest.raises(ValueError, match="no table header"):
        read_device_table("| a | b |\n| 1 | 2 |\n", HEADER)
