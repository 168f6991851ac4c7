"""The sharing page offers the cluster's GPU types and asks before leaving a type the tenant works on uncovered."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduling.models import UsageRecord
from tenants.models import TenantGpuQuota
from tests.browser.live import LiveConsoleTestCase
from tests.factories import make_node


@pytest.mark.browser
class SharingQuotaTests(LiveConsoleTestCase):
    def test_saving_quotas_that_leave_a_used_type_uncovered_asks_first_naming_it(self):
        make_node(gpu_type="nvidia")
        make_node(gpu_type="metax")
        UsageRecord.objects.create(tenant=self.tenant, day=timezone.now().date(), gpu_type="metax",
                                   task_type="batch", card_seconds=3600)
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/sharing/")
        card = self.page.locator(f"#tenant-{self.tenant.id}")
        expect(card.locator("input[name^=nominal_]")).to_have_count(2)

        card.locator("input[name=nominal_nvidia]").fill("16")
        card.get_by_role("button", name="Save quotas").click()
        warning = self.page.locator(f"#uncovered-{self.tenant.id}")
        expect(warning).to_contain_text("used metax in the last 7 days")
        self.shot("sharing-confirm-uncovered")
        assert not TenantGpuQuota.objects.exists()
        # Only the button that names the types confirms: saving as before asks again. The warning is on the page
        # already: mark it, and wait for the answer's new warning before clicking in it (not in the one it replaces).
        warning.evaluate("node => node.dataset.answered = 'before'")
        self.page.locator(f"#tenant-{self.tenant.id}").get_by_role("button", name="Save quotas").click()
        expect(warning).not_to_have_attribute("data-answered", "before")
        expect(warning).to_contain_text("metax")
        assert not TenantGpuQuota.objects.exists()

        warning.get_by_role("button", name="Save without metax").click()
        expect(self.page.locator(f"#tenant-{self.tenant.id} .flash-success")).to_contain_text("Saved")
        assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("nvidia", 16)]
