import re

from django.core.management import call_command


def test_bench_framework_schedules_a_synthetic_cluster_and_reports_the_rate(capsys):
    call_command("bench_framework", nodes=20, tasks=50)
    line = capsys.readouterr().out.strip()
    figures = re.fullmatch(r"20 nodes, 50 tasks: [\d.]+ ms/task \(\d+ tasks/s\), (\d+) bound, .*", line)
    assert figures, line
    assert 0 < int(figures.group(1)) <= 50


def test_bench_framework_runs_fgd_as_the_layout_against_the_tasks_own_shapes(capsys):
    from scheduling.framework.snapshot import TaskInfo
    from scheduling.management.commands.bench_framework import layout_plugin_set
    from scheduling.plugins.fgd import Fgd

    plugin_set = layout_plugin_set("fgd", [TaskInfo(id=1, tenant_id=1, gpu_required=1, cpu_cores=4)])
    scorers = {plugin.name: plugin for plugin, _ in plugin_set.scorers}
    assert "spread" not in scorers and isinstance(scorers["fgd"], Fgd) and scorers["fgd"].workload()
    call_command("bench_framework", nodes=20, tasks=30, layout="fgd")
    line = capsys.readouterr().out.strip()
    figures = re.fullmatch(r"20 nodes, 30 tasks: [\d.]+ ms/task \(\d+ tasks/s\), (\d+) bound, .*, layout: fgd", line)
    assert figures, line
    assert 0 < int(figures.group(1)) <= 30
