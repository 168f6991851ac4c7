"""Reading a node's GPU interconnect topology from ``nvidia-smi topo -m`` (the agent's side of the
``heteroflow.io/gpu-topology`` label, whose grammar is ``nodes.topology_label``)."""

import re

from nodes.topology_label import (LABELLED_CARD_TYPE, TOPOLOGY_LABEL, GpuTopology, decode_label, encode_label,
                                  nvlink_domains)

__all__ = ["LABELLED_CARD_TYPE", "TOPOLOGY_LABEL", "GpuTopology", "decode_label", "encode_label", "nvlink_domains",
           "parse_nvidia_smi_topo"]

_GPU_NAME = re.compile(r"GPU(\d+)")
_NVLINK_CELL = re.compile(r"NV\d+")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
# Header names that contain a space; every other header token is a single word (GPU0, NIC3, mlx5_0, ...).
_HEADER_TOKEN = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")


def parse_nvidia_smi_topo(text: str) -> GpuTopology:
    """Read the GPU part of ``nvidia-smi topo -m`` output.

    Columns are located by the header line, never by position: NIC and mlx rows and columns, the legends and the
    ``CPU Affinity`` / ``GPU NUMA ID`` columns are skipped; ``NV#`` cells are NVLinks; the NUMA node comes from
    ``NUMA Affinity`` (``N/A``, empty or absent means unknown). Tab-separated output and whitespace-aligned copies
    of it are both accepted. Raises ``ValueError`` when the text has no GPU matrix.
    """
    lines = [_ANSI_ESCAPE.sub("", line).rstrip("\r\n") for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if _is_header(line)), None)
    if header_at is None:
        raise ValueError("no GPU header line in nvidia-smi topo output")
    columns = _HEADER_TOKEN.findall(lines[header_at])
    gpu_columns = {position: int(m[1]) for position, name in enumerate(columns) if (m := _GPU_NAME.fullmatch(name))}
    numa_column = columns.index("NUMA Affinity") if "NUMA Affinity" in columns else None

    links: set[tuple[int, int]] = set()
    numa: dict[int, int | None] = {}
    for line in lines[header_at + 1:]:
        cells = _row_cells(line)
        if not cells or not (label := _GPU_NAME.fullmatch(cells[0])):
            continue
        row_card = int(label[1])
        # Cells line up with header columns from the left; newer drivers emit an extra empty cell before
        # "GPU NUMA ID", which only shifts columns to the right of the ones read here.
        values = cells[1:]
        for position, column_card in gpu_columns.items():
            if position < len(values) and _NVLINK_CELL.fullmatch(values[position]) and column_card != row_card:
                links.add((min(row_card, column_card), max(row_card, column_card)))
        numa[row_card] = _numa_value(values[numa_column]) if numa_column is not None and numa_column < len(values) \
            else None
    if not numa:
        raise ValueError("no GPU rows in nvidia-smi topo output")
    cards = tuple(sorted(numa))
    return GpuTopology(links=frozenset(link for link in links if set(link) <= set(cards)), numa=numa, cards=cards)


def _is_header(line: str) -> bool:
    tokens = _HEADER_TOKEN.findall(line)
    # Data rows contain the "X" self cell; the header is the first line naming GPU columns without one.
    return bool(tokens) and "X" not in tokens and any(_GPU_NAME.fullmatch(token) for token in tokens)


def _row_cells(line: str) -> list[str]:
    # Tabs keep empty cells (an unknown affinity stays in its column); aligned copies only have whitespace.
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t")]
    return line.split()


def _numa_value(cell: str) -> int | None:
    return int(cell) if cell.isdigit() else None
