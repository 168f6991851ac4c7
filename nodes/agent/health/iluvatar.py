"""Iluvatar CoreX health from `ixsmi -q -x` (nvidia-smi's XML layout): `ecc_errors/double_bit` > 0 → failed;
single-bit (corrected) errors are noted only."""

from __future__ import annotations

from xml.etree import ElementTree

from .base import FAILED, OK, CardFinding, HealthReader, HealthReport, count


class IluvatarHealthReader(HealthReader):
    gpu_type = "iluvatar"
    commands = (("ixsmi", "-q", "-x"),)

    def parse(self, text: str) -> HealthReport:
        try:
            root = ElementTree.fromstring(text.strip())
        except ElementTree.ParseError as exc:
            raise ValueError(f"not ixsmi -q -x XML: {exc}") from exc
        cards = []
        for position, gpu in enumerate(root.iter("gpu")):
            finding = CardFinding()
            double, single = count(gpu.findtext("ecc_errors/double_bit")), count(gpu.findtext("ecc_errors/single_bit"))
            if double:
                finding.note(FAILED, "ecc-double-bit", f"{double} double-bit ECC error(s)")
            if single:
                finding.note(OK, "ecc-single-bit", f"{single} corrected single-bit ECC error(s)")
            minor = (gpu.findtext("minor_number") or "").strip()
            cards.append(finding.card(int(minor) if minor.isdigit() else position, gpu.get("id")))
        if not cards:
            raise ValueError("no <gpu> element in ixsmi -q -x output")
        return HealthReport(tuple(cards))
