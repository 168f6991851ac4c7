"""Huawei Ascend NPU health (design §17.3): the `Health` column of `npu-smi info`, `npu-smi info -t health`
(`Health Status`, `Error Code`, `Error Information`) and `npu-smi info -t ecc` (DDR/HBM bit-error counters).

Huawei's values: `OK` → ok; `Warning` (a minor alarm: the NPU still computes) → degraded; `Alarm`, `Critical` and
`UNKNOWN` (the chip does not answer) → failed. In the ECC report a double-bit error since boot → failed; double-bit
errors in the lifetime totals or isolated pages only → degraded. A tool that cannot reach the driver (`dcmi module
initialize failed`) is a failed verdict, the cards unread.
"""

from __future__ import annotations

import re

from nodes.agent.detectors.ascend import parse_npu_smi_info

from .base import DEGRADED, FAILED, OK, CardFinding, HealthReader, HealthReport, count

HEALTH_OF = {"ok": OK, "warning": DEGRADED, "alarm": FAILED, "critical": FAILED, "unknown": FAILED}
_TOOL_FAILURE = re.compile(r"dcmi module initialize failed.*|.*\bfailed\. ?\(?ret|.*ret is -\d+", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^\s*(?P<key>[A-Za-z][^:]*?)\s*:\s*(?P<value>.*?)\s*$")
_NO_ERROR = {"", "na", "n/a", "0"}


class AscendHealthReader(HealthReader):
    gpu_type = "ascend"
    commands = (("npu-smi", "info"),)

    def parse(self, text: str) -> HealthReport:
        return parse_npu_smi_health(text)


def parse_npu_smi_health(text: str) -> HealthReport:
    if "Health" not in text and "Error Count" not in text:
        failure = next((line.strip() for line in text.splitlines() if _TOOL_FAILURE.search(line)), None)
        if failure is not None:
            return HealthReport.tool_failure(failure)
    if "Bus-Id" in text and "|" in text:
        return _from_table(text)
    values = {match["key"].lower(): match["value"] for line in text.splitlines()
              if (match := _KEY_VALUE.match(line))}
    if "health status" in values or "health" in values:
        return _from_health_query(values)
    if any("bit error count" in key for key in values):
        return _from_ecc_query(values)
    raise ValueError("neither an npu-smi info table nor an npu-smi -t health/ecc report")


def _from_table(text: str) -> HealthReport:
    cards = parse_npu_smi_info(text)
    states = []
    for line in text.splitlines():
        if "Process id" in line or "Process name" in line:
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(cells) >= 3 and cells[0][:1].isdigit() and len(cells[0].split()) > 1:
            states.append(cells[1])
    if len(states) != len(cards):
        raise ValueError(f"{len(cards)} NPUs but {len(states)} Health cells")
    findings = []
    for card, state in zip(cards, states, strict=True):
        finding = CardFinding()
        health = HEALTH_OF.get(state.lower(), FAILED)
        if health != OK:
            finding.note(health, f"health-{state.lower()}", f"npu-smi reports Health {state}")
        findings.append(finding.card(card.index))
    return HealthReport(tuple(findings))


def _from_health_query(values: dict[str, str]) -> HealthReport:
    state = values.get("health status", values.get("health", ""))
    finding = CardFinding()
    health = HEALTH_OF.get(state.lower(), FAILED)
    code = values.get("error code", "NA")
    information = values.get("error information", "NA")
    if health != OK or code.lower() not in _NO_ERROR:
        finding.note(health, f"npu-{code}" if code.lower() not in _NO_ERROR else f"health-{state.lower()}",
                     f"Health {state}" + (f": {information}" if information.lower() not in _NO_ERROR else ""))
    return HealthReport((finding.card(count(values.get("npu id")) if "npu id" in values else None),))


def _from_ecc_query(values: dict[str, str]) -> HealthReport:
    finding = CardFinding()
    for memory in ("ddr", "hbm"):
        now = count(values.get(f"{memory} double bit error count"))
        lifetime = count(values.get(f"{memory} double bit aggregate total err cnt"))
        isolated = count(values.get(f"{memory} double bit isolated pages count"))
        if now:
            finding.note(FAILED, f"{memory}-double-bit", f"{now} {memory.upper()} double-bit error(s)")
        elif lifetime or isolated:
            finding.note(DEGRADED, f"{memory}-double-bit-aggregate",
                         f"{lifetime} {memory.upper()} double-bit error(s) in the lifetime, {isolated} page(s) "
                         "isolated")
    return HealthReport((finding.card(count(values.get("npu id")) if "npu id" in values else None),))
