"""The plugin page and the diagnostics say which queue order is in force; the diagnostics show each tenant's
decayed share (design §17.1, §17.4)."""

import re
from datetime import datetime, time, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.utils import timezone

from scheduling.models import PluginConfig, UsageRecord
from tenants.models import TenantGpuQuota


def _in_force(page: str) -> str:
    return " ".join(re.search(r'id="queue-order-in-force">(.*?)</(?:span|div)>', page, re.S).group(1).split())


@pytest.mark.django_db
def test_both_pages_say_the_default_order_then_the_one_chosen(admin_web):
    assert "<code>priority</code> — priority, then creation (FIFO" in _in_force(
        admin_web.get("/diagnostics/").content.decode())
    assert "Order in force: priority" in _in_force(admin_web.get("/plugins/").content.decode())

    PluginConfig.objects.update_or_create(name="queue-sort", defaults={"extra": {"order": "fair-share"}})

    assert "<code>fair-share</code> — priority, then the tenant's decayed usage" in _in_force(
        admin_web.get("/diagnostics/").content.decode()).replace("&#x27;", "'")
    assert "Order in force: fair-share" in _in_force(admin_web.get("/plugins/").content.decode())


@pytest.mark.django_db
def test_the_diagnostics_show_each_tenants_decayed_share(admin_web, tenant, other_tenant):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    week_ago = timezone.now().date() - timedelta(days=7)
    UsageRecord.objects.create(tenant=tenant, day=week_ago, gpu_type="nvidia",
                               task_type="batch", card_seconds=4 * 86400)
    UsageRecord.objects.create(tenant=other_tenant, day=timezone.now().date(), gpu_type="nvidia",
                               task_type="batch", card_seconds=3600)

    card = re.search(r'id="decayed-shares".*?</table>', admin_web.get("/diagnostics/").content.decode(), re.S)[0]
    rows = [re.sub(r"<[^>]+>", " ", row).split() for row in re.findall(r"<tr><td>.*?</tr>", card, re.S)]

    # 96 card-hours weighed from the middle of their day (a half-life ago, give or take the hour of the run), over 4
    # nominal cards; the other tenant has no nominal: ∞, after. Card-hours show one decimal and the share two.
    middle = datetime.combine(week_ago, time(12), tzinfo=dt_timezone.utc)
    expected = 96 * 0.5 ** ((timezone.now() - middle).total_seconds() / (7 * 86400))
    assert rows[0][0] == tenant.name and rows[0][2] == "4"
    card_hours, share = float(rows[0][1]), float(rows[0][3])
    assert card_hours == pytest.approx(expected, abs=0.06)
    assert share == pytest.approx(card_hours / 4, abs=0.05 / 4 + 0.005)
    assert rows[1] == [other_tenant.name, "1.0", "—", "∞"]


@pytest.mark.django_db
def test_the_diagnostics_need_staff(tenant_web):
    assert tenant_web.get("/diagnostics/").status_code in (302, 403)
