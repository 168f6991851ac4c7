"""Tenants managed in the console: create one, change its limits, cohort and dedicated nodes, add a user, deactivate
one, each refusal beside its field."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from nodes.models import Node
from tenants.models import Cohort, Tenant
from tests.browser.live import LiveConsoleTestCase
from tests.factories import make_node


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

    def test_the_admin_moves_a_tenant_into_a_cohort_and_dedicates_nodes_to_it(self):
        research = Cohort.objects.create(name="research")
        make_node(name="gpu-a")
        make_node(name="gpu-b")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tenants/")
        row = self.page.locator(f"#tenant-{self.tenant.id}")

        row.locator(".tenant-cohort select[name=cohort]").select_option("research")
        row.locator(".tenant-cohort button").click()
        expect(self.page.locator("#tenants-notice")).to_have_text("acme is in cohort research.")
        assert Tenant.objects.get(id=self.tenant.id).cohort == research

        row.locator("input[name=dedicated_nodes]").fill("gpu-a, gpu-x")
        row.locator(".tenant-nodes button").click()
        expect(row.locator(".field-error[data-field=dedicated_nodes]")).to_have_text("no node named gpu-x")
        row.locator("input[name=dedicated_nodes]").fill("gpu-a, gpu-b")
        row.locator(".tenant-nodes button").click()
        expect(self.page.locator("#tenants-notice")).to_have_text("acme has 2 dedicated nodes.")
        expect(row.locator("input[name=dedicated_nodes]")).to_have_value("gpu-a, gpu-b")
        assert set(Node.objects.filter(dedicated_tenant=self.tenant).values_list("name", flat=True)) == {
            "gpu-a", "gpu-b"}
        self.shot("tenants-cohort-nodes")

    def test_a_tenant_user_is_refused(self):
        self.sign_in("alice", "tenant-password")
        assert self.page.goto(f"{self.live_server_url}/tenants/").status == 403


@pytest.mark.browser
class UserManagementTests(LiveConsoleTestCase):
    def test_the_admin_deactivates_a_user_after_confirming_and_reactivates_them(self):
        alice = get_user_model().objects.get(username="alice")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tenants/")
        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.locator(f"#user-{self.admin.id} button:has-text('Deactivate')").click()
        expect(self.page.locator(f"#user-{self.admin.id} .field-error[data-field=is_active]")).to_contain_text(
            "cannot deactivate yourself")

        asked = []
        self.page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        self.page.locator(f"#user-{alice.id} button:has-text('Deactivate')").click()
        expect(self.page.locator(f"#user-{alice.id} button:has-text('Deactivate')")).to_be_visible()
        assert asked and asked[0].startswith("Deactivate alice?")
        assert get_user_model().objects.get(id=alice.id).is_active

        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.locator(f"#user-{alice.id} button:has-text('Deactivate')").click()
        expect(self.page.locator("#tenants-notice")).to_contain_text("alice is deactivated")
        expect(self.page.locator(f"#user-{alice.id}")).to_contain_text("deactivated")
        assert not get_user_model().objects.get(id=alice.id).is_active
        tenant_browser = self._browser.new_context().new_page()
        tenant_browser.goto(f"{self.live_server_url}/login/")
        tenant_browser.fill("input[name=username]", "alice")
        tenant_browser.fill("input[name=password]", "tenant-password")
        tenant_browser.click("button[type=submit]")
        expect(tenant_browser.locator(".form-error")).to_contain_text("correct username and password")
        tenant_browser.context.close()

        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.locator(f"#user-{alice.id} button:has-text('Reactivate')").click()
        expect(self.page.locator("#tenants-notice")).to_contain_text("alice is active again")
        assert get_user_model().objects.get(id=alice.id).is_active

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
