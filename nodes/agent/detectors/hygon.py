"""Hygon DCUs via ``hy-smi`` (or ``rocm-smi`` from Hygon's DTK) JSON output.

Both tools are rocm-smi derivatives. Hygon entries are recognised by their ``DCU use (%)`` / ``HCU use (%)``
key (older and newer drivers); AMD entries printed by a stock rocm-smi on the same host are not Hygon cards.
"""

from __future__ import annotations

import json

from .base import Card, Detector, optional_int

_FLAGS = ["-i", "--showmeminfo", "vram", "--showpower", "--showserial", "--showuse", "--showtemp",
          "--showproductname", "--showuniqueid", "--json"]
_UTILIZATION_KEYS = ("HCU use (%)", "DCU use (%)")
# Prefer the die temperature; older drivers report only edge/junction/memory sensors.
_TEMPERATURE_KEYS = ("Temperature (Sensor core) (C)", "Temperature (Sensor junction) (C)",
                     "Temperature (Sensor edge) (C)", "Temperature (Sensor mem) (C)")


def parse_hy_smi_json(text: str) -> list[Card]:
    cards = []
    for card_name, info in json.loads(text).items():
        utilization_key = next((key for key in _UTILIZATION_KEYS if key in info), None)
        if not card_name.startswith("card") or utilization_key is None:
            continue
        index = int(card_name.removeprefix("card"))
        temperature = next((info[key] for key in _TEMPERATURE_KEYS if key in info), "")
        cards.append(Card(
            index=index,
            uuid=info.get("Unique ID") or info.get("Serial Number") or f"hygon-{index}",
            type="hygon",
            model=info.get("Card Series", "Hygon DCU"),
            memory_total_mb=int(info["vram Total Memory (MiB)"]),
            memory_used_mb=optional_int(info.get("vram Total Used Memory (MiB)")),
            utilization=optional_int(info[utilization_key]),
            temperature=optional_int(temperature),
        ))
    return cards


class HygonDetector(Detector):
    gpu_type = "hygon"
    # DTK installs without hy-smi ship Hygon's rocm-smi, which prints the same JSON.
    commands = (("hy-smi", *_FLAGS), ("rocm-smi", *_FLAGS))

    def parse(self, text: str) -> list[Card]:
        return parse_hy_smi_json(text)
