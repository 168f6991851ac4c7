"""Prometheus metrics, read from the database at scrape time.

Cycles run in Celery workers and scheduler loops, requests in web processes: in-process counters would each see a
part. The database holds the whole truth (ledgers, attempt counts, cycle records), so the collector reads it.
"""

from django.db.models import Count, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from nodes.models import Node
from scheduling.models import AttemptCodeCount, CycleRecord, Task


class ClusterCollector:
    def collect(self):
        nodes = GaugeMetricFamily("heteroflow_nodes", "Nodes by status", labels=["status"])
        for row in Node.objects.values("status").annotate(n=Count("id")):
            nodes.add_metric([row["status"]], row["n"])
        yield nodes

        total = GaugeMetricFamily("heteroflow_gpus_total", "Cards per GPU architecture", labels=["gpu_type"])
        used = GaugeMetricFamily("heteroflow_gpus_used", "Cards held by active tasks (scheduler ledger)",
                                 labels=["gpu_type"])
        for row in Node.objects.values("gpu_type").annotate(total=Sum("gpu_total"), used=Sum("gpu_used")):
            total.add_metric([row["gpu_type"] or "none"], row["total"] or 0)
            used.add_metric([row["gpu_type"] or "none"], row["used"] or 0)
        yield total
        yield used

        tasks = GaugeMetricFamily("heteroflow_tasks", "Tasks by status", labels=["status"])
        for row in Task.objects.values("status").annotate(n=Count("id")):
            tasks.add_metric([row["status"]], row["n"])
        yield tasks

        attempts = CounterMetricFamily("heteroflow_scheduling_attempts", "Scheduling attempts by code",
                                       labels=["code"])
        for code, count in AttemptCodeCount.objects.values_list("code", "count"):
            attempts.add_metric([code], count)
        yield attempts

        last = CycleRecord.objects.order_by("-started_at", "-id").first()
        cycle = GaugeMetricFamily("heteroflow_last_cycle", "Figures of the latest scheduling cycle", labels=["figure"])
        if last is not None:
            for figure in ("considered", "bound", "failed", "preempting", "duration_ms"):
                cycle.add_metric([figure], getattr(last, figure))
        yield cycle
