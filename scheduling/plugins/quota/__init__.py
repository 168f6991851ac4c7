"""quota (always on, the framework's chain; design §1, §16.2): a task its tenant's quotas do not admit (total cap;
per-type nominal, or borrowing from the cohort) waits, whatever the nodes. Unresolvable: preempting other tenants'
work frees nothing of this tenant's quota (design §9). A fractional task's share is estimated on the largest card of
its type; bind counts the card it gets."""

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import PRE_FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.status import Code, Status

NAME = "quota"


class QuotaPreFilter:
    name = NAME

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        book = snapshot.quotas
        admission = book.admit(task, gpu_type=task.gpu_type, share=book.estimated_share(task))
        if admission.refusal is None:
            return Status(plugin=self.name)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (admission.refusal,), self.name,
                      attempt_code=reasons.QUOTA_EXCEEDED)


def factory(setting: PluginSetting) -> QuotaPreFilter:
    return QuotaPreFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({PRE_FILTER}),
                  description="Holds a task its tenant's quotas do not admit.")
