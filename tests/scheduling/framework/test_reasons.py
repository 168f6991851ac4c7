from scheduling.framework import reasons
from scheduling.plugins import gpu_filter
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU
from scheduling.plugins.tenant import DEDICATED_OTHER_TENANT


def test_summary_orders_by_count_then_alphabetically():
    line = reasons.summarize(12, {INSUFFICIENT_GPU: 3, gpu_filter.GPU_TYPE_MISMATCH: 8,
                                  DEDICATED_OTHER_TENANT: 1})
    assert line == "0/12 nodes are available: 8 GPU type mismatch, 3 Insufficient GPU, 1 dedicated to another tenant."
    tie = reasons.summarize(5, {"zeta": 2, "alpha": 2})
    assert tie == "1/5 nodes are available: 2 alpha, 2 zeta."


def test_summary_without_rejections():
    assert reasons.summarize(3, {}) == "3/3 nodes are available."


def test_every_spec_error_code_is_defined():
    assert set(reasons.ERROR_CODES) == {
        "NoSchedulableNodes", "InsufficientResources", "NoTenantEligibleGPU", "PreemptionPending", "QuotaExceeded",
        "GPUTypeUnavailable", "LoadThresholdExceeded", "PortsExhausted", "ShardAllocationFailed", "GangIncomplete",
        "BindConflict", "TenantInactive", "InternalError",  # design §15.6, issue 13 (fault isolation)
        "InsufficientHostResources",  # design §16.1
        "ReclaimPending",  # design §16.2
        "NeverFits",  # no registered node could ever hold the task (scheduling.framework.never_fits)
    }
