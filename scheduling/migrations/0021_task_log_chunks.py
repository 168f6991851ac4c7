import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0020_usage_records'),
    ]

    # Each kept tail becomes its log's first chunk before the column goes: nothing kept is lost.
    operations = [
        migrations.AddField(
            model_name='tasklog',
            name='end_offset',
            field=models.BigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name='TaskLogChunk',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('start_offset', models.BigIntegerField()),
                ('content', models.BinaryField()),
                ('task', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='log_chunks', to='scheduling.task')),
            ],
            options={
                'indexes': [models.Index(fields=['task', 'start_offset'], name='task_log_chunk_order')],
            },
        ),
            migrations.RunSQL(
            sql="""
                INSERT INTO scheduling_tasklogchunk (task_id, start_offset, content)
                SELECT task_id, dropped_bytes, content FROM scheduling_tasklog WHERE length(content) > 0;
                UPDATE scheduling_tasklog SET end_offset = dropped_bytes + length(content);
            """,
            reverse_sql="""
                UPDATE scheduling_tasklog l SET content = coalesce(
                    (SELECT string_agg(substring(c.content FROM greatest(1, l.dropped_bytes - c.start_offset + 1)::int),
                                       ''::bytea ORDER BY c.start_offset)
                       FROM scheduling_tasklogchunk c
                      WHERE c.task_id = l.task_id AND c.start_offset + length(c.content) > l.dropped_bytes), ''::bytea);
            """,
        ),
        migrations.RemoveField(
            model_name='tasklog',
            name='content',
        ),
    ]
