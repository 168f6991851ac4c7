"""A task's `card_type` (which of its node's card types its `gpus` index, design §15.3) is part of its placement: a
change to it alone logs the node too, like the other placement columns of `0006_task_placements_log_node_changes`."""

from django.db import migrations

_PLACEMENT_COLUMNS = "node_id, status, tenant_id, type, gpus, shard, port, gpu_memory_mb"

_LOG_PLACEMENTS = """
CREATE OR REPLACE FUNCTION heteroflow_log_placement_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT node_id, pg_current_xact_id()::text::bigint, now() FROM new_rows WHERE node_id IS NOT NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT node_id, pg_current_xact_id()::text::bigint, now() FROM old_rows WHERE node_id IS NOT NULL;
    ELSE
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT touched.node_id, pg_current_xact_id()::text::bigint, now()
          FROM old_rows o JOIN new_rows n ON n.id = o.id,
               LATERAL (VALUES (o.node_id), (n.node_id)) AS touched (node_id)
         WHERE touched.node_id IS NOT NULL AND ({old}) IS DISTINCT FROM ({new});
    END IF;
    RETURN NULL;
END
$$;
"""


def _function(columns: str) -> str:
    names = [name.strip() for name in columns.split(",")]
    return _LOG_PLACEMENTS.format(old=", ".join(f"o.{name}" for name in names),
                                  new=", ".join(f"n.{name}" for name in names))


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0008_merge_placement_log_and_queue_state"),
    ]

    operations = [
        migrations.RunSQL(_function(f"{_PLACEMENT_COLUMNS}, card_type"), _function(_PLACEMENT_COLUMNS)),
    ]
