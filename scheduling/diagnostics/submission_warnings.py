"""What a submitter should know at once about work just accepted: that no registered node could ever hold it
(`scheduling.framework.never_fits`), said by the submit response, the form and `hf submit` before any cycle ran."""

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Max

from nodes.models import GPU, Node
from scheduling.framework import reasons
from scheduling.framework.never_fits import never_fits_message
from scheduling.framework.snapshot import CardInfo, NodeInfo


def _node_sizes() -> list[NodeInfo]:
    """Every registered node as its size only: its cards as one stand-in per card type with the largest card's
    memory (what `never_fits` reads), in two queries whatever the cluster's size."""
    cards = {node_id: (types, largest) for node_id, types, largest in
             GPU.objects.values("node_id").annotate(types=ArrayAgg("type", distinct=True),
                                                     largest=Max("memory_total_mb"))
             .values_list("node_id", "types", "largest")}
    sizes = []
    rows = Node.objects.values_list("id", "name", "dedicated_tenant_id", "gpu_type", "gpu_total", "cpu_cores",
                                    "memory_gb")
    for node_id, name, dedicated_tenant_id, gpu_type, gpu_total, cpu_cores, memory_gb in rows:
        types, largest = cards.get(node_id, ((), 0))
        sizes.append(NodeInfo(id=node_id, name=name, dedicated_tenant_id=dedicated_tenant_id, gpu_type=gpu_type,
                              gpu_total=gpu_total, cpu_cores=cpu_cores, memory_gb=memory_gb,
                              cards=[CardInfo(index=0, type=card_type, memory_total_mb=largest)
                                     for card_type in types]))
    return sizes


def submission_warnings(*, tenant_id: int, gpu_type: str, gpu_required: int, gpu_memory_mb: int, cpu_cores: float,
                        memory_mb: int) -> list[dict[str, str]]:
    """`[{code, message}]` for a submission of the tenant's with these figures (a task, or one member of a
    group)."""
    message = never_fits_message(tenant_id=tenant_id, gpu_type=gpu_type, gpu_required=gpu_required,
                                 gpu_memory_mb=gpu_memory_mb, cpu_cores=cpu_cores, memory_mb=memory_mb,
                                 nodes=_node_sizes())
    return [] if message is None else [{"code": reasons.NEVER_FITS, "message": message}]
