"""affinity (always on, the framework's chain: design §3, §6 topology): `topology: required` turns the task's
region/zone/rack labels into hard constraints on nodes that have the field set; a node with the field empty still
passes."""

import numpy as np

from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.interfaces import CycleState, RowPlugin, label_is
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NO_CODE, NodeTable

NAME = "affinity"
REGION_MISMATCH = "region mismatch"
ZONE_MISMATCH = "zone mismatch"
RACK_MISMATCH = "rack mismatch"
PLACEMENT_FIELDS = ("region", "zone", "rack")


class AffinityFilter(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (REGION_MISMATCH, ZONE_MISMATCH, RACK_MISMATCH)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if not label_is(task.labels, "topology", "required"):
            return codes
        columns = ((table.region, table.regions), (table.zone, table.zones), (table.rack, table.racks))
        for code, (field, (column, vocabulary)) in enumerate(zip(PLACEMENT_FIELDS, columns), start=1):
            wanted = str(task.labels.get(field, "")).strip()
            if not wanted:
                continue
            values = column[rows]
            codes[(codes == 0) & (values != NO_CODE) & (values != vocabulary.lookup(wanted))] = code
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        if not label_is(task.labels, "topology", "required"):
            return EVERY_ROW_PASSES
        return tuple(str(task.labels.get(field, "")).strip() for field in PLACEMENT_FIELDS)


def factory(setting: PluginSetting) -> AffinityFilter:
    return AffinityFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="With `topology: required`, keeps nodes in the task's region, zone and rack.")
