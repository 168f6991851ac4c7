"""What a submitter should know at once about work just accepted: that no registered node could ever hold it
(`scheduling.framework.never_fits`), said by the submit response, the form and `hf submit` before any cycle ran."""

from scheduling.diagnostics.node_sizes import node_sizes
from scheduling.framework import reasons
from scheduling.framework.never_fits import never_fits_message


def submission_warnings(*, tenant_id: int, gpu_type: str, gpu_required: int, gpu_memory_mb: int, cpu_cores: float,
                        memory_mb: int) -> list[dict[str, str]]:
    """`[{code, message}]` for a submission of the tenant's with these figures (a task, or one member of a
    group)."""
    message = never_fits_message(tenant_id=tenant_id, gpu_type=gpu_type, gpu_required=gpu_required,
                                 gpu_memory_mb=gpu_memory_mb, cpu_cores=cpu_cores, memory_mb=memory_mb,
                                 nodes=node_sizes.stand_ins())
    return [] if message is None else [{"code": reasons.NEVER_FITS, "message": message}]
