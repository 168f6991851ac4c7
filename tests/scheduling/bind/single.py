"""A bind of one placement, as the tests drive the pipeline: a batch of one."""

from scheduling.bind import BindOutcome, Placement, bind_batch
from scheduling.bind.recheck import Reserve
from scheduling.framework.snapshot import NodeInfo, SchedulerConfig, TaskInfo, TenancyView


def bind_task(task: TaskInfo, node: NodeInfo, cards: list[int], *, config: SchedulerConfig,
              tenancy: TenancyView | None = None, reserve: Reserve | None = None) -> BindOutcome:
    """Place `task` on `node` or change nothing."""
    return bind_batch([Placement(task, node, cards)], config=config, tenancy=tenancy, reserve=reserve)[0]
