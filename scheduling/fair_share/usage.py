"""Usage per GPU type in SQL (design §16.2): the expressions THE tenant-usage reader (`scheduling.fair_share.quotas.
tenant_gpu_usage_rows`) groups by. A whole-card task counts `gpu_required` cards; a fractional task its
`gpu_memory_mb` over the memory of the card its shard is on — `scheduling.fair_share.book.card_share`, the same rule
in Python for the snapshot's binds. Amounts are hundredths of a card.
"""

from django.db.models import CharField, IntegerField
from django.db.models.expressions import RawSQL

from nodes.models import GPU, Node
from scheduling.fair_share.book import CARD
from scheduling.models import Task

_TASK = Task._meta.db_table

SHARE_SQL = f"""
CASE WHEN "{_TASK}"."gpu_required" > 0 THEN {CARD} * "{_TASK}"."gpu_required"
     ELSE coalesce((SELECT greatest(1, least({CARD}, round({CARD}.0 * "{_TASK}"."gpu_memory_mb"
                                                           / nullif(g.memory_total_mb, 0))))::integer
                      FROM {GPU._meta.db_table} g
                     WHERE g.node_id = "{_TASK}"."node_id" AND g.index = ("{_TASK}"."shard" ->> 'card')::integer
                     ORDER BY (g.type = "{_TASK}"."card_type") DESC LIMIT 1), {CARD})
END"""

# The type a task's cards are of: the cards bind chose, else the type it asked for, else its node's.
TYPE_SQL = f"""
coalesce(nullif("{_TASK}"."card_type", ''), nullif("{_TASK}"."gpu_type", ''),
         (SELECT n.gpu_type FROM {Node._meta.db_table} n WHERE n.id = "{_TASK}"."node_id"), '')"""


def share_expression() -> RawSQL:
    return RawSQL(SHARE_SQL, (), output_field=IntegerField())


def type_expression() -> RawSQL:
    return RawSQL(TYPE_SQL, (), output_field=CharField())
