"""The node change log and the triggers that write it for the node and card tables (the task table's trigger is
`scheduling.0005`): statement-level, so a statement touching many rows writes each node id once."""

import django.db.models.functions.datetime
from django.db import migrations, models

# TG_OP picks the transition tables that exist for the event (INSERT has no old rows, DELETE no new ones).
_LOG_ROWS = """
CREATE FUNCTION heteroflow_log_{name}_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT {column}, pg_current_xact_id()::text::bigint, now() FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT {column}, pg_current_xact_id()::text::bigint, now() FROM old_rows;
    ELSE
        INSERT INTO nodes_nodechange (node_id, xid, at)
        SELECT DISTINCT changed.{column}, pg_current_xact_id()::text::bigint, now()
          FROM (SELECT {column} FROM old_rows UNION ALL SELECT {column} FROM new_rows) changed;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER {name}_inserted_logs_node_changes AFTER INSERT ON {table}
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION heteroflow_log_{name}_changes();
CREATE TRIGGER {name}_updated_logs_node_changes AFTER UPDATE ON {table}
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION heteroflow_log_{name}_changes();
CREATE TRIGGER {name}_deleted_logs_node_changes AFTER DELETE ON {table}
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION heteroflow_log_{name}_changes();
"""

_DROP = """
DROP TRIGGER {name}_inserted_logs_node_changes ON {table};
DROP TRIGGER {name}_updated_logs_node_changes ON {table};
DROP TRIGGER {name}_deleted_logs_node_changes ON {table};
DROP FUNCTION heteroflow_log_{name}_changes();
"""

_TABLES = {"node": ("nodes_node", "id"), "card": ("nodes_gpu", "node_id")}


class Migration(migrations.Migration):

    dependencies = [
        ('nodes', '0002_node_audit_entry'),
    ]

    operations = [
        migrations.CreateModel(
            name='NodeChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('node_id', models.BigIntegerField()),
                ('xid', models.BigIntegerField(db_index=True)),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), db_index=True)),
            ],
        ),
        *(
            migrations.RunSQL(_LOG_ROWS.format(name=name, table=table, column=column),
                              _DROP.format(name=name, table=table))
            for name, (table, column) in _TABLES.items()
        ),
    ]
