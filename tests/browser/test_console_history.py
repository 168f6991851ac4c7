"""The dashboard's last 24 hours: the recorded points drawn inline, the plugin changes as markers."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from plugins_admin.models import PluginChange
from scheduling.models import ClusterSample
from tests.browser.live import LiveConsoleTestCase


@pytest.mark.browser
class HistoryTests(LiveConsoleTestCase):
    def test_the_dashboard_draws_the_last_day_with_plugin_changes_as_markers(self):
        now = timezone.now()
        for minutes, held, pending in ((600, 2, 5), (300, 6, 12), (1, 8, 3)):
            ClusterSample.objects.create(at=now - timedelta(minutes=minutes), gpu_total={"nvidia": 8, "ascend": 4},
                                         gpu_used={"nvidia": held, "ascend": 1}, pending=pending, cycle_ms=12.4)
        ClusterSample.objects.create(at=now - timedelta(hours=30), gpu_total={"metax": 2}, gpu_used={}, pending=99)
        change = PluginChange.objects.create(plugin="binpack", actor=self.admin, before={"enabled": False},
                                             after={"enabled": True})
        PluginChange.objects.filter(id=change.id).update(at=now - timedelta(hours=2))
        self.sign_in("admin", "admin-password")
        expect(self.page.locator("#history-allocation")).to_contain_text("nvidia 100%")
        expect(self.page.locator("#history-allocation")).to_contain_text("ascend 25%")
        expect(self.page.locator("#history-allocation")).not_to_contain_text("metax")
        expect(self.page.locator("#history-allocation polyline")).to_have_count(2)
        expect(self.page.locator("#history-pending")).to_contain_text("Tasks pending 3 (peak 12)")
        expect(self.page.locator("#history-cycle")).to_contain_text("mean ms 12 (peak 12)")
        marker = self.page.locator("#history-pending .history-marker title")
        expect(marker).to_have_text("binpack: enabled False → True (by admin)")
        self.shot("dashboard-history")

    def test_a_tenant_sees_no_cluster_history(self):
        ClusterSample.objects.create(at=timezone.now(), gpu_total={"nvidia": 8}, gpu_used={"nvidia": 1}, pending=1)
        self.sign_in("alice", "tenant-password")
        expect(self.page.locator("h1")).to_have_text("Cluster overview")
        expect(self.page.locator("#history")).to_have_count(0)
