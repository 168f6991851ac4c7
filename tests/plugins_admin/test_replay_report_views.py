"""The plugin page's link to the latest replay report, and the staff-only report page and chart."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from scheduling.models import Task
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

COMMAND_LINE = "python manage.py replay_trace --from-db --since 24h"


@pytest.fixture
def reports(settings, tmp_path):
    settings.REPLAY_REPORT_DIR = tmp_path / "replay"
    return settings.REPLAY_REPORT_DIR


@pytest.fixture
def replayed_day(reports, tenant):
    """A report of the last day's three tasks on two nodes of two cards, under binpack and spread."""
    for name in ("a", "b"):
        make_node(name=name, cards=2)
    for minutes, gpus in ((50, 1), (40, 1), (30, 2)):
        task = make_task(tenant=tenant, gpu_required=gpus)
        Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(minutes=minutes))
    call_command("replay_trace", "--from-db", "--since", "24h", "--policy", "binpack,spread", "--seeds", "1",
                 "--jobs", "1", "--report", stdout=StringIO())
    return next(reports.glob("replay-*.svg"))


def test_without_a_report_the_pages_say_how_to_make_one(reports, staff_page_client):
    page = staff_page_client.get("/plugins/").content.decode()
    assert "No replay report yet" in page and COMMAND_LINE in page
    assert "Latest replay report" not in page

    report_page = staff_page_client.get("/plugins/replay/")
    assert report_page.status_code == 200 and COMMAND_LINE in report_page.content.decode()
    assert staff_page_client.get("/plugins/replay/chart.svg").status_code == 404


def test_after_a_report_the_plugin_page_links_it_with_date_policies_and_window(replayed_day, staff_page_client):
    page = staff_page_client.get("/plugins/").content.decode()

    made = timezone.now().strftime("%Y-%m-%d")
    assert '<a href="/plugins/replay/">Latest replay report (' in page
    assert f"({made}" in page and "UTC, binpack, spread, tasks created in the last 24h (" in page
    assert "No replay report yet" not in page


def test_the_report_page_shows_the_chart_and_the_figures(replayed_day, staff_page_client):
    html = staff_page_client.get("/plugins/replay/").content.decode()

    assert 'src="/plugins/replay/chart.svg?made=' in html
    assert "3 (0 finished, 0 still running, 3 never started: 1h each)" in html
    assert "2 nodes, 4 GPUs" in html
    binpack = html[html.index('id="replay-binpack"'):html.index('id="replay-spread"')]
    spread = html[html.index('id="replay-spread"'):]
    assert "<td>100.00 ± 0.00</td><td>100.00 ± 0.00</td><td>0.00 ± 0.00</td>" in binpack
    assert "<td>50.00 ± 0.00</td><td>50.00 ± 0.00</td><td>1.00 ± 0.00</td>" in spread

    chart = staff_page_client.get("/plugins/replay/chart.svg")
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml"
    assert b"".join(chart.streaming_content) == replayed_day.read_bytes()
    assert chart["Content-Security-Policy"].startswith("default-src 'none'")


def test_tenants_are_refused_the_report_and_its_chart(replayed_day, tenant_page_client):
    assert tenant_page_client.get("/plugins/replay/").status_code == 403
    assert tenant_page_client.get("/plugins/replay/chart.svg").status_code == 403


def test_anonymous_visitors_are_sent_to_sign_in(replayed_day):
    for path in ("/plugins/replay/", "/plugins/replay/chart.svg"):
        response = Client().get(path)
        assert response.status_code == 302 and response["Location"].startswith(f"/login/?next={path}")


NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nnode-1,32000,262144,2,V100M16\n"
PODS_CSV = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time\n"
            "p1,4000,8192,2,1000,,LS,Running,0,100,0\n"
            "p2,4000,8192,1,1000,,LS,Running,10,50,10\n"
            "p3,4000,8192,1,500,,LS,Running,20,200,20\n")


def test_a_dynamic_replay_report_shows_its_chart_and_the_waits_by_size_class(reports, staff_page_client, tmp_path):
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    (tmp_path / "pods.csv").write_text(PODS_CSV)
    call_command("replay_trace", "--dynamic", "--nodes", str(tmp_path / "nodes.csv"), "--pods",
                 str(tmp_path / "pods.csv"), "--policy", "binpack,fgd", "--seeds", "2", "--jobs", "1", "--report",
                 stdout=StringIO())

    html = staff_page_client.get("/plugins/replay/").content.decode()

    assert "with departures, arrivals compressed 1×" in html and "p99 waiting time by size class" in html
    assert "<th>2 cards: p99 wait (min) · never placed</th>" in html and "<th>Time-weighted allocation</th>" in html
    assert 'id="replay-binpack"' in html and 'id="replay-fgd"' in html
    chart = staff_page_client.get("/plugins/replay/chart.svg")
    assert b'class="wait"' in b"".join(chart.streaming_content)
