"""MetaX GPU health: `mx-smi` (`GPU-State`: anything but `Available` → failed), `mx-smi --count-ecc`
(uncorrectable SRAM/DRAM → failed, retired pages noted) and `mx-smi -j` (`unavailable_reason` set → failed; an
uncorrected RAS count or a PCIe uncorrectable/DBE event → degraded). Only healthy captures are published."""

from __future__ import annotations

import json
import re

from .base import DEGRADED, FAILED, OK, CardFinding, HealthReader, HealthReport, count
from .tables import health_from_table

_GPU_LINE = re.compile(r"^GPU#(?P<index>\d+)\b", re.MULTILINE)
_KEY_VALUE = re.compile(r"^\s*(?P<key>[A-Za-z][^:]*?)\s*:\s*(?P<value>.*?)\s*$")


def _judge_state(cell: str, finding: CardFinding) -> None:
    if cell and cell.lower() != "available":
        finding.note(FAILED, "gpu-state", f"mx-smi reports GPU-State {cell}")


class MetaxHealthReader(HealthReader):
    gpu_type = "metax"
    commands = (("mx-smi",), ("mx-smi", "--count-ecc"))

    def parse(self, text: str) -> HealthReport:
        if "{" in text and '"attached_gpus"' in text:
            return _from_json(text)
        if _GPU_LINE.search(text):
            return _from_count_ecc(text)
        return health_from_table(text, index_label="gpu", header=("gpu", "bus-id", "gpu-state"),
                                 cell_label="gpu-state", judge=_judge_state)


def _from_count_ecc(text: str) -> HealthReport:
    cards, finding, index = [], None, None
    for line in text.splitlines():
        if match := _GPU_LINE.match(line):
            if finding is not None:
                cards.append(finding.card(index))
            finding, index = CardFinding(), int(match["index"])
        elif finding is not None and (pair := _KEY_VALUE.match(line)):
            key, value = pair["key"].lower(), count(pair["value"])
            if "uncorrectable" in key and value:
                finding.note(FAILED, key.replace(" ", "-"), f"{value} {pair['key']} ECC error(s)")
            elif key == "double bit ecc" and value:
                finding.note(OK, "pages-retired", f"{value} page(s) retired for double-bit errors")
    if finding is not None:
        cards.append(finding.card(index))
    return HealthReport(tuple(cards))


def _from_json(text: str) -> HealthReport:
    body = json.loads(text[text.index("{"):])
    cards = []
    for bus_id, gpu in body.items():
        if not isinstance(gpu, dict) or "device_id" not in gpu:
            continue
        finding = CardFinding()
        if gpu.get("unavailable_reason"):
            finding.note(FAILED, "unavailable", f"mx-smi: unavailable: {gpu['unavailable_reason']}")
        if (gpu.get("ras_count") or {}).get("uncorrected_error"):
            finding.note(DEGRADED, "ras-uncorrected",
                         f"uncorrected RAS errors: {gpu['ras_count']['uncorrected_error']}")
        events = gpu.get("pci_event_info") or {}
        for kind in ("aer_ue", "dbe"):
            if events.get(kind):
                finding.note(DEGRADED, f"pci-{kind}", f"{len(events[kind])} {kind} event(s)")
        cards.append(finding.card(int(gpu["device_id"]), bus_id))
    return HealthReport(tuple(cards))
