import re

import pytest

from tests.processes import run_benchmark, throwaway_databases_left


@pytest.mark.django_db
def test_bench_scheduler_binds_the_seeded_queue_and_prints_the_rate_beside_the_bind_ceiling():
    output = run_benchmark("bench_scheduler", "--nodes", "20", "--pending", "60", "--instances", "1,2")
    runs = re.findall(r"^instances=(\d) cycles=\d+ considered=\d+ bound=(\d+) of 60 pending", output, re.MULTILINE)
    assert [instances for instances, _ in runs] == ["1", "2"], output
    assert all(int(bound) > 0 for _, bound in runs), "the spawned scheduler processes bind on the benchmark database"
    rates = re.findall(r"^tasks_per_second=([\d.]+) bind_ceiling_per_s=([\d.]+) ratio=([\d.]+)$", output, re.MULTILINE)
    assert len(rates) == 2 and all(float(ceiling) > 0 for _, ceiling, _ in rates), output
    assert re.search(r"^scaling instances=1:1\.00x instances=2:[\d.]+x$", output, re.MULTILINE), output
    assert throwaway_databases_left(output) == []


@pytest.mark.django_db
def test_bench_scheduler_prints_the_metrics_share_of_cycle_time_and_can_run_without_them():
    with_metrics = run_benchmark("bench_scheduler", "--nodes", "10", "--pending", "30")
    without = run_benchmark("bench_scheduler", "--nodes", "10", "--pending", "30", "--without-metrics")

    spent = re.search(r"^metrics_ms_per_cycle=([\d.]+) \(([\d.]+) % of cycle time\)$", with_metrics, re.MULTILINE)
    assert spent and float(spent.group(1)) > 0, with_metrics
    assert re.search(r"^metrics_ms_per_cycle=0\.00 \(0\.0 % of cycle time\)$", without, re.MULTILINE), without


@pytest.mark.django_db
@pytest.mark.parametrize("option, values, title, first, second", [
    ("--quotas", "off,on", "quotas", "off", "on"),
    ("--layout", "spread,fgd", "layout", "spread", "fgd"),
    ("--big-jobs", "off,on", "big_jobs", "off", "on"),
    ("--big-jobs", "off,defrag", "big_jobs", "off", "defrag"),
    ("--queue-order", "priority,fair-share", "queue_order", "priority", "fair-share"),
])
def test_bench_scheduler_compares_two_settings_in_one_run(option, values, title, first, second):
    output = run_benchmark("bench_scheduler", "--nodes", "10", "--pending", "30", option, values)

    runs = re.findall(r"^database \S+: 10 nodes, 30 pending tasks, layout (\S+), quotas (on|off), "
                      r"big jobs (on|off|defrag), queue order (\S+) ", output, re.MULTILINE)
    position = {"--layout": 0, "--quotas": 1, "--big-jobs": 2, "--queue-order": 3}[option]
    assert [run[position] for run in runs] == [first, second], output
    figure = rf"{first}=[\d.]+ {second}=[\d.]+ {second}/{first}=[\d.]+"
    assert re.search(rf"^{title} instances=1: cycle_ms_p50 {figure}; cycle_ms_per_task {figure}; "
                     rf"tasks_per_second {figure}$", output, re.MULTILINE), output


@pytest.mark.django_db
def test_bench_scheduler_repeats_its_runs_in_rounds_and_prints_each_comparisons_median_over_them():
    """Every other round runs its cases in reverse order, so that a run's place favours no case over the rounds.
    The issues' goals are ratios to their reference ceiling measured in the same run: before and after each run."""
    output = run_benchmark("bench_scheduler", "--nodes", "10", "--pending", "30", "--layout", "spread,fgd",
                           "--rounds", "2", "--reference-ceiling")

    assert re.findall(r"^round (\d) of 2", output, re.MULTILINE) == ["1", "2"], output
    assert re.search(r"^round 2 of 2, cases in reverse order$", output, re.MULTILINE), output
    layouts = re.findall(r"^database \S+: 10 nodes, 30 pending tasks, layout (\S+),", output, re.MULTILINE)
    assert layouts == ["spread", "fgd", "fgd", "spread"], output
    per_round = [float(ratio) for ratio in re.findall(r"^layout instances=1: .*tasks_per_second spread=[\d.]+ "
                                                        r"fgd=[\d.]+ fgd/spread=([\d.]+)$", output, re.MULTILINE)]
    assert len(per_round) == 2, output
    summary = re.search(r"^layout instances=1 over 2 rounds, fgd/spread: cycle_ms_p50 median=[\d.]+ min=[\d.]+ "
                        r"max=[\d.]+; cycle_ms_per_task median=[\d.]+ min=[\d.]+ max=[\d.]+; tasks_per_second "
                        r"median=([\d.]+) min=([\d.]+) max=([\d.]+)$", output, re.MULTILINE)
    assert summary, output
    assert [float(figure) for figure in summary.groups()] == pytest.approx(
        [sum(per_round) / 2, min(per_round), max(per_round)], abs=0.001)

    spread_ratios = [ratio for layout, ratio in zip(layouts, _reference_ratios(output)) if layout == "spread"]
    spread = re.search(r"^reference_ratio instances=1 layout=spread over 2 rounds, worst state: median=([\d.]+) "
                       r"min=([\d.]+) max=([\d.]+)$", output, re.MULTILINE)
    assert spread, output
    assert [float(figure) for figure in spread.groups()] == pytest.approx(
        [sum(spread_ratios) / 2, min(spread_ratios), max(spread_ratios)], abs=0.001)
    assert re.search(r"^reference_ratio instances=1 layout=fgd over 2 rounds", output, re.MULTILINE), output
    assert throwaway_databases_left(output) == []


def _reference_ratios(output: str) -> list[float]:
    """Each run's rate over the mean of the reference ceilings printed around it, checked against its printed ratio."""
    rates = [float(rate) for rate in re.findall(r"^tasks_per_second=([\d.]+) ", output, re.MULTILINE)]
    references = re.findall(r"^reference_ceiling_per_s before=(\d+) after=(\d+) reference_ratio=([\d.]+) ",
                            output, re.MULTILINE)
    assert references and len(rates) == len(references), output
    for rate, (before, after, ratio) in zip(rates, references):
        assert float(before) > 0 and float(after) > 0
        assert float(ratio) == pytest.approx(rate / ((float(before) + float(after)) / 2), rel=0.01)
    return [float(ratio) for *_, ratio in references]


# Reads per bound task of the 300-node case when every statement keeps a good plan (~120 rows, 0.2 statements);
# a plan that flips with the statistics multiplies the rows (1,300–11,000 per task were seen).
MOST_ROWS_PER_BOUND_TASK = 400
MOST_STATEMENTS_PER_BOUND_TASK = 1.0


@pytest.mark.django_db
def test_a_cycle_reads_a_bounded_number_of_rows_per_bound_task_in_every_statistics_state():
    output = run_benchmark("bench_scheduler", "--nodes", "300", "--pending", "600", "--stats", "none,seeded,fresh",
                           "--reference-ceiling")

    states = re.findall(r"^database \S+: .* \(statistics (\w+);", output, re.MULTILINE)
    counts = re.findall(r"^per_bound_task statements=([\d.]+) rows_read=([\d.]+) ", output, re.MULTILINE)
    assert states == ["none", "seeded", "fresh"] and len(counts) == 3, output
    for state, (statements, rows) in zip(states, counts):
        assert float(statements) <= MOST_STATEMENTS_PER_BOUND_TASK, (state, output)
        assert float(rows) <= MOST_ROWS_PER_BOUND_TASK, (state, output)
    worst = re.search(r"^statistics instances=1 layout=spread: none .*; seeded .*; fresh .*; worst tasks_per_second="
                      r"[\d.]+ worst reference_ratio=([\d.]+)$", output, re.MULTILINE)
    assert worst, output
    assert float(worst.group(1)) == pytest.approx(min(_reference_ratios(output)), abs=0.001)
