"""A task's placement is part of its node's state for the scheduler cache: inserting, deleting or changing a
task that is (or was) on a node — its status, node, cards, shard, port, type, tenant or memory — logs that node
in `nodes_nodechange` in the same transaction. Changes to tasks on no node (submissions, the queue) log nothing."""

from django.db import migrations

_LOG_PLACEMENTS = """
CREATE FUNCTION heteroflow_log_placement_changes() RETURNS trigger LANGUAGE plpgsql AS $$
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
         WHERE touched.node_id IS NOT NULL
           AND (o.node_id, o.status, o.tenant_id, o.type, o.gpus, o.shard, o.port, o.gpu_memory_mb)
               IS DISTINCT FROM (n.node_id, n.status, n.tenant_id, n.type, n.gpus, n.shard, n.port, n.gpu_memory_mb);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER task_inserted_logs_node_changes AFTER INSERT ON scheduling_task
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION heteroflow_log_placement_changes();
CREATE TRIGGER task_updated_logs_node_changes AFTER UPDATE ON scheduling_task
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION heteroflow_log_placement_changes();
CREATE TRIGGER task_deleted_logs_node_changes AFTER DELETE ON scheduling_task
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION heteroflow_log_placement_changes();
"""

_DROP = """
DROP TRIGGER task_inserted_logs_node_changes ON scheduling_task;
DROP TRIGGER task_updated_logs_node_changes ON scheduling_task;
DROP TRIGGER task_deleted_logs_node_changes ON scheduling_task;
DROP FUNCTION heteroflow_log_placement_changes();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("nodes", "0003_node_changes"),
        ("scheduling", "0005_plugin_config_from_plugins_admin"),
    ]

    operations = [migrations.RunSQL(_LOG_PLACEMENTS, _DROP)]
