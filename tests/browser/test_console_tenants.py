"""Tenants managed in the console: create one, change its limits, add a user, each refusal beside its field."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tenants.models import Tenant
from tests.browser.live import LiveConsoleTestCase


@pytest.mark.browser
class TenantPageTests(LiveConsoleTestCase):
    def test_the_admin_creates_a_tenant_limits_it_and_adds_a_user(self):
        self.sign_in("admin", "admin-password")
        self.page.click("nav a:has-text('Tenants')")
        self.page.fill("#new-tenant input[name=name]", "acme")
        self.page.click("#new-tenant button[type=submit]")
        expect(self.page.locator("#new-tenant .field-error[data-field=name]")).to_contain_text("already exists")
        self.page.fill("#new-tenant input[name=name]", "research")
        self.page.fill("#new-tenant input[name=gpu_quota]", "32")
        self.page.click("#new-tenant button[type=submit]")
        expect(self.page.locator("#tenants-notice")).to_have_text("Created tenant research.")
        research = Tenant.objects.get(name="research")
        assert research.gpu_quota == 32

        row = self.page.locator(f"#tenant-{research.id}")
        row.locator("input[name=max_priority]").fill("500")
        row.locator(".tenant-limits button").click()
        expect(row.locator(".field-error[data-field=max_priority]")).to_be_visible()
        row.locator("input[name=max_priority]").fill("60")
        row.locator("input[name=gpu_quota]").fill("")
        row.locator("select[name=status]").select_option("inactive")
        row.locator(".tenant-limits button").click()
        expect(self.page.locator("#tenants-notice")).to_have_text("Saved research.")
        research.refresh_from_db()
        assert (research.max_priority, research.gpu_quota, research.status) == (60, None, "inactive")

        row.locator("input[name=username]").fill("dana")
        row.locator("input[name=password]").fill("short")
        row.locator(".tenant-user button").click()
        expect(row.locator(".field-error[data-field=password]")).to_be_visible()
        row.locator("input[name=password]").fill("a-long-enough-password")
        row.locator(".tenant-user button").click()
        expect(self.page.locator("#tenants-notice")).to_contain_text("Added dana to research")
        assert get_user_model().objects.get(username="dana").membership.tenant == research
        self.shot("tenants")

    def test_a_tenant_user_is_refused(self):
        self.sign_in("alice", "tenant-password")
        assert self.page.goto(f"{self.live_server_url}/tenants/").status == 403


@pytest.mark.browser
class UserManagementTests(LiveConsoleTestCase):
    def test_the_admin_grants_rights_and_hands_out_a_one_time_reset_link(self):
        alice = get_user_model().objects.get(username="alice")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tenants/")
        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.locator(f"#user-{self.admin.id} button:has-text('Withdraw')").click()
        expect(self.page.locator(f"#user-{self.admin.id} .field-error")).to_contain_text("your own administrator")
        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.locator(f"#user-{alice.id} button:has-text('Make administrator')").click()
        expect(self.page.locator("#tenants-notice")).to_have_text("alice is now an administrator.")
        assert get_user_model().objects.get(id=alice.id).is_staff

        self.page.locator(f"#user-{alice.id} button:has-text('Reset link')").click()
        link = self.page.locator("#reset-link").inner_text()
        assert link.startswith(f"{self.live_server_url}/reset/")
        visitor = self._browser.new_context().new_page()
        visitor.goto(link)
        visitor.fill("input[name=new_password1]", "a-brand-new-password")
        visitor.fill("input[name=new_password2]", "a-brand-new-password")
        visitor.click("#new-password button[type=submit]")
        expect(visitor.locator("#password-set")).to_be_visible()
        assert get_user_model().objects.get(id=alice.id).check_password("a-brand-new-password")
        visitor.goto(link)
        expect(visitor.locator("#link-used")).to_be_visible()
        visitor.context.close()
