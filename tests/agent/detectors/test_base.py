import pytest

from nodes.agent.detectors.base import Card, mebibytes, pci_vendor_present, used_and_total_mb


@pytest.mark.parametrize(("text", "expected"), [
    ("0 MiB/ 23374 MiB", (0, 23374)),
    ("0MiB / 32512MiB", (0, 32512)),
    ("504 / 8064 MB", (504, 8064)),
    ("10240 MiB/1048576 MiB", (10240, 1048576)),
    ("N/A / 98304MiB", (None, 98304)),
    ("147456MiB", (None, 147456)),
    ("N/A", (None, None)),
])
def test_used_and_total_memory_cells(text, expected):
    assert used_and_total_mb(text) == expected


def test_sizes_in_the_units_the_clis_print():
    assert [mebibytes(text) for text in ("42976 MiB", "8064 MB", "64 GiB", "2 GB", "8064", "N/A", "Enable", None)] == [
        42976, 8064, 65536, 2048, 8064, None, None, None]
    assert mebibytes("16", default_unit="GiB") == 16384
    with pytest.raises(ValueError):
        used_and_total_mb("1 / 2 / 3 MiB")


def test_pci_vendor_present_reads_sysfs(tmp_path):
    for address, vendor in [("0000:00:02.0", "0x8086\n"), ("0000:43:00.0", "0x1d22\n")]:
        (tmp_path / address).mkdir()
        (tmp_path / address / "vendor").write_text(vendor)
    (tmp_path / "0000:99:00.0").mkdir()  # no vendor file: skipped, not a failure
    assert pci_vendor_present("0x1d22", tmp_path)
    assert pci_vendor_present("0x8086", tmp_path)
    assert not pci_vendor_present("0x1e36", tmp_path)
    assert not pci_vendor_present("0x1d22", tmp_path / "missing")


def test_the_heartbeat_sends_unknown_readings_as_zero_because_its_api_takes_no_unknowns():
    unknown = Card(index=1, uuid="enflame-0000:0f:00.0", type="enflame", model=None, memory_total_mb=None,
                   memory_used_mb=512, utilization=None, temperature=None)
    assert unknown.to_json() == {"index": 1, "uuid": "enflame-0000:0f:00.0", "type": "enflame", "model": "",
                                 "memory_total_mb": 0, "memory_used_mb": 0, "utilization": 0, "temperature": 0,
                                 "numa": None}
    known = Card(index=0, uuid="u", type="kunlun", model="K200", memory_total_mb=8064, memory_used_mb=504,
                 utilization=3, temperature=37, numa=1)
    assert known.to_json() == {"index": 0, "uuid": "u", "type": "kunlun", "model": "K200", "memory_total_mb": 8064,
                               "memory_used_mb": 504, "utilization": 3, "temperature": 37, "numa": 1}
