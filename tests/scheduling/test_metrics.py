import pytest
from django.test import Client

from scheduling.models import AttemptCodeCount
from tests.factories import make_node, make_task


@pytest.mark.django_db
def test_metrics_report_ledgers_and_attempts_from_the_database(admin_user, tenant):
    make_node(gpu_type="ascend", cards=8, gpu_used=3)
    make_task(tenant=tenant)
    AttemptCodeCount.objects.create(code="QuotaExceeded", count=4)
    client = Client()
    client.force_login(admin_user)

    body = client.get("/metrics").content.decode()

    assert 'heteroflow_gpus_total{gpu_type="ascend"} 8.0' in body
    assert 'heteroflow_gpus_used{gpu_type="ascend"} 3.0' in body
    assert 'heteroflow_tasks{status="pending"} 1.0' in body
    assert 'heteroflow_scheduling_attempts_total{code="QuotaExceeded"} 4.0' in body


@pytest.mark.django_db
def test_metrics_need_staff_or_the_bearer_token(tenant_client, settings):
    settings.HETEROFLOW_METRICS_TOKEN = "scrape-secret"
    assert Client().get("/metrics").status_code == 403
    tenant_user = Client()
    tenant_user.force_login(tenant_client.user)
    assert tenant_user.get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
