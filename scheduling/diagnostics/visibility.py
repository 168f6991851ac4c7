"""What a tenant user may read of scheduling diagnostics (design §15.6): nothing that names another
tenant's tasks, priorities or dedicated nodes; such things are counted instead. Admins see everything."""

from collections import Counter

from scheduling.models import SchedulingAttempt, Task
from scheduling.plugins.single_tenant_runtime import SINGLE_TENANT_RUNTIME
from scheduling.plugins.tenant import DEDICATED_OTHER_TENANT

# Filter reasons whose nodes belong to someone else (dedicated to, or held by, another tenant): a tenant learns how
# many, not which.
REASONS_COUNTED_NOT_NAMED = frozenset({DEDICATED_OTHER_TENANT, SINGLE_TENANT_RUNTIME})


def filtered_nodes_for(filtered: dict[str, list[str]], *, admin: bool) -> dict[str, list[str] | int]:
    """The attempt's filtered nodes by reason, with the names of nodes counted-not-named replaced by their count."""
    if admin:
        return filtered
    return {reason: (len(names) if reason in REASONS_COUNTED_NOT_NAMED else names)
            for reason, names in filtered.items()}


def attempt_diagnostics(attempt: SchedulingAttempt, *, tenant_id: int | None) -> dict:
    """The `diagnostics` of a task in the API; `tenant_id` None for an admin."""
    extra = dict(attempt.extra)
    entries = attempt.node_entries()
    body = {"code": attempt.code, "message": attempt.message}
    if tenant_id is None:
        return {**body, "nodes": entries, **extra}
    hidden = Counter(entry["reason"] for entry in entries if entry["reason"] in REASONS_COUNTED_NOT_NAMED)
    body["nodes"] = [entry for entry in entries if entry["reason"] not in REASONS_COUNTED_NOT_NAMED]
    if hidden:
        body["nodes_not_shown"] = dict(hidden)
    extra.pop("preempted_by", None)
    if isinstance(extra.get("preemption"), dict):
        extra["preemption"] = _own_victims_only(extra["preemption"], tenant_id=tenant_id)
        # Per node, a preemption's reason may be another tenant's dedication: tenants read the counts by reason.
        extra["preemption"].pop("node_reasons", None)
    return {**body, **extra}


def _own_victims_only(preemption: dict, *, tenant_id: int) -> dict:
    mentioned = [task_id for key in ("victims", "lost") for task_id in preemption.get(key, [])]
    own = set(Task.objects.filter(id__in=mentioned, tenant_id=tenant_id).values_list("id", flat=True))
    shown = dict(preemption)
    for key in ("victims", "lost"):
        ids = preemption.get(key, [])
        shown[key] = [task_id for task_id in ids if task_id in own]
        shown[f"{key}_of_other_tenants"] = len(ids) - len(shown[key])
    return shown
