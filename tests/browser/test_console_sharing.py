"""The sharing page offers the cluster's GPU types and asks before leaving a type the tenant works on uncovered; a
tenant's overview shows every type of the cluster."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduling.models import UsageRecord
from tenants.models import TenantGpuQuota
from tests.browser.live import ARTIFACTS, LiveConsoleTestCase
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


@pytest.mark.browser
class TenantOverviewTests(LiveConsoleTestCase):
    def test_a_tenant_sees_every_gpu_type_of_the_cluster_with_used_nominal_and_borrowed(self):
        make_node(gpu_type="nvidia")
        make_node(gpu_type="metax")
        make_node(gpu_type="ascend")
        TenantGpuQuota.objects.create(tenant=self.tenant, gpu_type="nvidia", nominal=4)
        self.sign_in("alice", "tenant-password")

        figures = self.page.locator("#your-share .sharing-figures tbody tr")
        expect(figures).to_have_count(3)
        expect(self.page.locator("#your-share tr[data-gpu-type=nvidia] .nominal")).to_have_text("4")
        for gpu_type in ("metax", "ascend"):
            row = self.page.locator(f"#your-share tr[data-gpu-type={gpu_type}]")
            expect(row.locator(".used")).to_have_text("0")
            # No row: no guarantee, it may only borrow.
            expect(row.locator(".nominal")).to_have_text("—")
            expect(row.locator(".borrowed")).to_have_text("0")
        self.page.locator("#your-share").screenshot(path=str(ARTIFACTS / "tenant-share.png"))
