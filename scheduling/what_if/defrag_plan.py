"""Preview of defragmentation (design §16.3): for each reserved job still waiting, what the `defrag` plugin would move
now, moving nothing — `GET /api/v1/scheduler/defrag-plan` and the diagnostics page's panel.

Each job is attempted on the cluster as it is now (the cards held for other nominees held, as a cycle holds them),
and when no node takes it the decision is the one a cycle's defrag makes (`preemption.moves.defrag_decision`), under
the stored settings, whether the plugin is enabled or not (the answer says which).
"""

import random
from typing import Any

from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, prepare_admission, task_info_from_row
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import Task
from scheduling.plugins import defrag
from scheduling.preemption.moves import defrag_decision, moves_in_last_hour
from scheduling.queue.nomination import hold_nominated_cards
from scheduling.selectors import current_plugin_set, current_plugin_settings
from scheduling.what_if.read_only import read_only_transaction

FITS_NOW = "FitsWithoutMoves"
MOVES = "Moves"
NO_MOVES = "NoMoves"


def defrag_plan() -> dict[str, Any]:
    """`{enabled, max_moves, moves_per_hour, moves_last_hour, jobs: [{task, name, gpu_type, gpu_required,
    reserved_node, code, message, node, moves: [{task, name, tenant, priority, gpu_required, from, to, cards}]}]}`."""
    with read_only_transaction():
        setting = next(item for item in current_plugin_settings() if item.name == defrag.NAME)
        settings = defrag.settings_of(setting.extra)
        framework = Framework(current_plugin_set(), SchedulerConfig.from_settings())
        snapshot = prepare_admission(build_snapshot())
        held = hold_nominated_cards(snapshot)
        # A reserved gang is placed whole by the gang planner, which defrag does not serve.
        rows = (Task.objects.filter(status=lifecycle.PENDING, reserved_at__isnull=False, group__isnull=True)
                .order_by("reserved_at", "id").values_list("nominated_node__name", *TASK_INFO_FIELDS))
        jobs = []
        for reserved_node, *fields in rows:
            job = task_info_from_row(tuple(fields))
            held.release_for(job, snapshot)
            entry = {"task": job.id, "name": job.name, "gpu_type": job.gpu_type, "gpu_required": job.gpu_required,
                     "reserved_node": reserved_node, "node": None, "moves": []}
            result = framework.schedule(job, snapshot, random.Random(job.id))
            if result.node is not None:
                entry.update(code=FITS_NOW, message=f"It fits on {result.node.name} now: nothing needs moving.")
            else:
                decision = defrag_decision(job, snapshot, framework, **settings)
                if decision.plan is None:
                    entry.update(code=NO_MOVES, message=f"{result.message} {decision.why_not.capitalize()}.")
                else:
                    plan = decision.plan
                    entry.update(code=MOVES, node=plan.node.name,
                                 message=f"Moving {len(plan.moves)} task(s) off {plan.node.name} frees "
                                         f"{plan.frees} cards for it.",
                                 moves=[{"task": move.task.id, "name": move.task.name,
                                         "tenant": move.task.tenant_id, "priority": move.task.priority,
                                         "gpu_required": move.task.gpu_required, "from": move.from_node.name,
                                         "to": move.to_node.name, "cards": list(move.cards)}
                                        for move in plan.moves])
            held.restore_for(job, snapshot)
            jobs.append(entry)
        return {"enabled": setting.enabled, **settings, "moves_last_hour": moves_in_last_hour(), "jobs": jobs}
