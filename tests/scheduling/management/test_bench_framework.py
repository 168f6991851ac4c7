import re

from django.core.management import call_command


def test_bench_framework_schedules_a_synthetic_cluster_and_reports_the_rate(capsys):
    call_command("bench_framework", nodes=20, tasks=50)
    line = capsys.readouterr().out.strip()
    figures = re.fullmatch(r"20 nodes, 50 tasks: [\d.]+ ms/task \(\d+ tasks/s\), (\d+) bound, .*", line)
    assert figures, line
    assert 0 < int(figures.group(1)) <= 50
