"""The Django admin shows the control plane's internal records to superusers, read-only."""

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling.models import CycleRecord

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", ["scheduling/cyclerecord", "scheduling/schedulingattempt",
                                   "scheduling/attemptcodecount", "scheduling/clustersample", "nodes/livenessclock"])
def test_internal_tables_are_read_only_for_superusers(client, model):
    client.force_login(get_user_model().objects.create_superuser(username="root", password="root-password-long"))
    record = CycleRecord.objects.create(started_at=timezone.now())

    listing = client.get(f"/admin/{model}/")
    assert listing.status_code == 200
    assert f'href="/admin/{model}/add/"' not in listing.content.decode()
    assert client.get(f"/admin/{model}/add/").status_code == 403
    if model == "scheduling/cyclerecord":
        assert client.post(f"/admin/{model}/{record.id}/delete/", {"post": "yes"}).status_code == 403
        assert CycleRecord.objects.filter(id=record.id).exists()
