"""NVIDIA card health (design §17.3): `nvidia-smi -q` (text), `nvidia-smi -q -x` (XML), `--query-gpu` CSV with the
ECC / retired-page / remapped-row fields, and the kernel log's `NVRM:` lines.

NVIDIA has no single health field, so the verdict is read from the counters (tests/fixtures/vendor-health/nvidia):

- `failed`: an uncorrectable ECC error since the driver loaded (volatile DRAM/SRAM uncorrectable, or double bit on
  pre-Ampere cards), `Remapping Failure Occurred: Yes`, `SRAM Threshold Exceeded: Yes` (NVIDIA's RMA criterion),
  Xid 48 (double-bit error), 64 (remapper/retirement could not record), 79 or a card "fallen off the bus", 95
  (uncontained memory error), and a tool that cannot reach the driver (`Failed to initialize NVML`).
- `degraded`: the card works but needs a reset or is wearing: remapped rows or page retirement pending, an
  uncorrectable error in the lifetime (aggregate) counters only, Xid 63 (row marked for remapping), 74 (NVLink), 94
  (contained memory error: the application was killed, the card goes on).
- Noted without changing the health: rows already remapped and pages already retired for earlier errors.

Other Xids (13, 31, 43, …) are errors of the application, not of the card, and are not reported.
`nvidia-smi -q` lists cards in index order, so a card's index is its position; the kernel log names cards by PCI
address, which `HealthReport.merged` matches to the `-q` reading of the same address.
"""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

from nodes.agent.detectors.query_blocks import parse_query_blocks

from .base import DEGRADED, FAILED, OK, CardFinding, HealthReader, HealthReport, count, worst

FAILED_XIDS = {48: "double-bit ECC error", 64: "ECC page retirement or row remapping could not be recorded",
               79: "GPU has fallen off the bus", 95: "uncontained ECC error"}
DEGRADED_XIDS = {63: "row marked for remapping, reset to activate", 74: "NVLink error",
                 94: "contained ECC error (the application was stopped)"}
_TOOL_FAILURES = ("Failed to initialize NVML", "NVIDIA-SMI has failed", "couldn't communicate with the NVIDIA driver")
_GPU_BLOCK = re.compile(r"GPU (?P<label>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), (?P<rest>.*)")
_FALLEN = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9A-Fa-f:.]+).*fallen off the bus")
_ISO_TIME = re.compile(r"^(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)[,.]?\d*(?P<zone>[+-]\d\d:\d\d)?")
_YES = "yes"
KERNEL_LOG_WINDOW = timedelta(hours=1)
_HEALTH_OF_CODE = {**{f"xid-{xid}": FAILED for xid in FAILED_XIDS}, **{f"xid-{xid}": DEGRADED for xid in DEGRADED_XIDS},
                   "fallen-off-the-bus": FAILED}


class NvidiaHealthReader(HealthReader):
    gpu_type = "nvidia"
    commands = (("nvidia-smi", "-q"),)
    optional_commands = (("dmesg", "--time-format=iso"),)

    def parse(self, text: str) -> HealthReport:
        return parse_nvidia_health(text)

    def recent(self, report: HealthReport) -> HealthReport:
        """Kernel-log events of the last KERNEL_LOG_WINDOW: the log keeps an Xid until reboot, and a card reset
        since must not stay failed for it. An event without a wall-clock time (plain `dmesg`) is kept."""
        cutoff = self.now() - KERNEL_LOG_WINDOW
        cards = []
        for card in report.cards:
            errors = tuple(error for error in card.errors if error.at is None or _aware(error.at) >= cutoff)
            if errors:
                cards.append(replace(card, errors=errors, health=worst(_HEALTH_OF_CODE.get(error.code, DEGRADED)
                                                                     for error in errors)))
        return replace(report, cards=tuple(cards))


def parse_nvidia_health(text: str) -> HealthReport:
    for line in text.splitlines():
        if any(failure in line for failure in _TOOL_FAILURES):
            return HealthReport.tool_failure(line.strip())
    stripped = text.lstrip()
    if stripped.startswith("<?xml") or stripped.startswith("<nvidia_smi_log"):
        return _from_xml(text)
    if "NVRM:" in text:
        return _from_kernel_log(text)
    first = stripped.splitlines()[0] if stripped else ""
    if "," in first and ("ecc.errors" in first or "remapped_rows" in first or "retired_pages" in first):
        return _from_query_csv(text)
    return _from_query_text(text)


def _judge(finding: CardFinding, *, volatile_uncorrectable: int, aggregate_uncorrectable: int,
           retirement_pending: bool, retired: int, remap_pending: bool, remap_failed: bool, remapped: int,
           sram_threshold: bool) -> None:
    if volatile_uncorrectable:
        finding.note(FAILED, "ecc-uncorrectable", f"{volatile_uncorrectable} uncorrectable ECC error(s) since the "
                                                   "driver loaded")
    elif aggregate_uncorrectable:
        finding.note(DEGRADED, "ecc-uncorrectable-aggregate",
                     f"{aggregate_uncorrectable} uncorrectable ECC error(s) in the card's lifetime")
    if sram_threshold:
        finding.note(FAILED, "sram-threshold-exceeded", "SRAM uncorrectable errors exceed NVIDIA's threshold")
    if remap_failed:
        finding.note(FAILED, "row-remap-failure", "row remapping failed")
    if remap_pending:
        finding.note(DEGRADED, "row-remap-pending", "remapped rows pending: the card needs a reset")
    elif remapped:
        finding.note(OK, "rows-remapped", f"{remapped} row(s) remapped for uncorrectable errors")
    if retirement_pending:
        finding.note(DEGRADED, "page-retirement-pending", "page retirement pending: the card needs a reset")
    elif retired:
        finding.note(OK, "pages-retired", f"{retired} page(s) retired for double-bit errors")


def _from_query_text(text: str) -> HealthReport:
    blocks = parse_query_blocks(text, _GPU_BLOCK)
    if not blocks:
        # A `-q` section without its `GPU <address>` line (an excerpt): one card whose index is not known.
        blocks = parse_query_blocks("GPU 0000:00:00.0\n" + text, _GPU_BLOCK)
        known = False
    else:
        known = True
    if not any(key.startswith(("ecc errors/", "remapped rows/", "retired pages/")) for block in blocks
               for key in block.values):
        raise ValueError("no ECC, retired-page or remapped-row section in nvidia-smi -q output")
    cards = []
    for position, block in enumerate(blocks):
        values = block.values

        def total(prefix: str, values=values) -> int:
            return max((count(value) for key, value in values.items() if key.startswith(prefix)
                        and ("uncorrectable" in key or "double bit" in key)), default=0)

        finding = CardFinding()
        _judge(finding, volatile_uncorrectable=total("ecc errors/volatile/"),
               aggregate_uncorrectable=total("ecc errors/aggregate/"),
               retirement_pending=(block.get("retired pages/pending page blacklist",
                                             "retired pages/pending page retirement") or "").lower() == _YES,
               retired=count(block.get("retired pages/double bit ecc")),
               remap_pending=(block.get("remapped rows/pending") or "").lower() == _YES,
               remap_failed=(block.get("remapped rows/remapping failure occurred") or "").lower() == _YES,
               remapped=count(block.get("remapped rows/uncorrectable error")),
               sram_threshold=(block.get("ecc errors/aggregate/sram threshold exceeded") or "").lower() == _YES)
        cards.append(finding.card(position if known else None, block.label if known else None))
    return HealthReport(tuple(cards))


def _from_xml(text: str) -> HealthReport:
    try:
        root = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError as exc:
        raise ValueError(f"not nvidia-smi -q -x XML: {exc}") from exc
    cards = []
    for position, gpu in enumerate(root.iter("gpu")):
        def largest(path: str, gpu=gpu) -> int:
            # Pre-Ampere drivers count `double_bit/total`; later ones `sram_uncorrectable`, `dram_uncorrectable`.
            return max((count(child.findtext("total")) if child.tag == "double_bit" else count(child.text)
                        for child in gpu.find(path) if gpu.find(path) is not None
                        and (child.tag == "double_bit" or "uncorrectable" in child.tag)), default=0)

        def flag(path: str, gpu=gpu) -> bool:
            return (gpu.findtext(path) or "").strip().lower() == _YES

        finding = CardFinding()
        _judge(finding, volatile_uncorrectable=largest("ecc_errors/volatile"),
               aggregate_uncorrectable=largest("ecc_errors/aggregate"),
               retirement_pending=flag("retired_pages/pending_retirement"),
               retired=count(gpu.findtext("retired_pages/double_bit_retirement/retired_count")),
               remap_pending=flag("remapped_rows/remapped_row_pending"),
               remap_failed=flag("remapped_rows/remapped_row_failure"),
               remapped=count(gpu.findtext("remapped_rows/remapped_row_unc")),
               sram_threshold=flag("ecc_errors/aggregate/sram_threshold_exceeded"))
        cards.append(finding.card(position, gpu.get("id")))
    if not cards:
        raise ValueError("no <gpu> element in nvidia-smi -q -x output")
    return HealthReport(tuple(cards))


def _from_query_csv(text: str) -> HealthReport:
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    fields = [cell.split("[")[0].strip() for cell in rows[0]]
    cards = []
    for position, row in enumerate(rows[1:]):
        value = dict(zip(fields, (cell.strip() for cell in row), strict=True))

        def largest(prefix: str, value=value) -> int:
            return max((count(cell) for name, cell in value.items() if name.startswith(prefix)
                        and not name.endswith("thresholdExceeded")), default=0)

        def flag(name: str, value=value) -> bool:
            return value.get(name, "").lower() == _YES

        finding = CardFinding()
        _judge(finding, volatile_uncorrectable=largest("ecc.errors.uncorrected.volatile."),
               aggregate_uncorrectable=largest("ecc.errors.uncorrected.aggregate."),
               retirement_pending=flag("retired_pages.pending"),
               retired=count(value.get("retired_pages.double_bit.count")),
               remap_pending=flag("remapped_rows.pending"), remap_failed=flag("remapped_rows.failure"),
               remapped=count(value.get("remapped_rows.uncorrectable")),
               sram_threshold=flag("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"))
        index = value.get("index")
        cards.append(finding.card(int(index) if index and index.isdigit() else position, value.get("pci.bus_id")))
    return HealthReport(tuple(cards))


def _from_kernel_log(text: str) -> HealthReport:
    findings: dict[str, CardFinding] = {}
    for line in _joined_messages(text):
        at = _time_of(line)
        if match := _XID.search(line):
            xid = int(match["xid"])
            health = FAILED if xid in FAILED_XIDS else DEGRADED if xid in DEGRADED_XIDS else None
            if health is not None:
                findings.setdefault(_with_function(match["bus"]), CardFinding()).note(
                    health, f"xid-{xid}", f"Xid {xid}: {match['rest'].strip()}"[:500], at)
        elif match := _FALLEN.search(line):
            findings.setdefault(_with_function(match["bus"]), CardFinding()).note(
                FAILED, "fallen-off-the-bus", "GPU has fallen off the bus and is not responding", at)
    return HealthReport(tuple(finding.card(None, bus) for bus, finding in findings.items()))


def _aware(at: str) -> datetime:
    """A kernel-log time; one printed without its offset is taken as UTC."""
    moment = datetime.fromisoformat(at)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _joined_messages(text: str) -> list[str]:
    """Kernel-log lines with a message's wrapped continuation lines (indented, no timestamp) joined to it."""
    messages: list[str] = []
    for line in text.splitlines():
        if messages and line[:1].isspace() and line.strip():
            messages[-1] += " " + line.strip()
        else:
            messages.append(line)
    return messages


def _time_of(line: str) -> str | None:
    match = _ISO_TIME.match(line)
    return f"{match['at']}{match['zone'] or ''}" if match else None


def _with_function(bus: str) -> str:
    """`0000:19:00` (the Xid spelling) → `0000:19:00.0`: a GPU is function 0 of its device."""
    return bus if "." in bus else f"{bus}.0"

