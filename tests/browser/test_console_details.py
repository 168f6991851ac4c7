"""The console's details: a phone-sized sidebar, a favicon, confirmations, ReDoc without errors."""

import pytest
from knox.models import AuthToken
from playwright.sync_api import expect

from tests.browser.live import LiveConsoleTestCase


@pytest.mark.browser
class DetailTests(LiveConsoleTestCase):
    def test_on_a_phone_the_sidebar_folds_into_a_menu(self):
        self.context.close()
        self.context = self._browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
        self.page = self.context.new_page()
        self.sign_in("admin", "admin-password")
        nav = self.page.locator("#main-nav")
        expect(nav).to_be_hidden()
        assert self.page.locator("h1").bounding_box()["y"] < 200, "the page starts near the top, not below the menu"
        self.shot("phone-dashboard")
        self.page.click("#nav-toggle")
        expect(nav).to_be_visible()
        expect(self.page.locator("#nav-toggle")).to_have_attribute("aria-expanded", "true")
        self.shot("phone-menu")
        self.page.click("#main-nav a:has-text('Tasks')")
        self.page.wait_for_url(f"{self.live_server_url}/tasks/")

    def test_pages_have_a_favicon(self):
        self.sign_in("admin", "admin-password")
        href = self.page.locator("link[rel=icon]").get_attribute("href")
        response = self.page.request.get(f"{self.live_server_url}{href}")
        assert response.ok and "svg" in response.headers["content-type"]

    def test_revoking_a_token_asks_first(self):
        AuthToken.objects.create(user=self.admin)
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tokens/")
        questions = []

        def answer(dialog, accept):
            questions.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        self.page.once("dialog", lambda dialog: answer(dialog, False))
        self.page.click("button[value=revoke]")
        self.page.wait_for_timeout(300)
        assert AuthToken.objects.filter(user=self.admin).count() == 1
        assert questions and questions[0].startswith("Revoke the token")
        self.page.once("dialog", lambda dialog: answer(dialog, True))
        self.page.click("button[value=revoke]")
        self.page.wait_for_load_state("networkidle")
        assert AuthToken.objects.filter(user=self.admin).count() == 0

    def test_redoc_shows_the_api_without_console_errors(self):
        self.sign_in("admin", "admin-password")
        errors = []
        self.page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        self.page.goto(f"{self.live_server_url}/api/schema/redoc/")
        # ReDoc renders the whole schema in the browser before its title shows: seconds on a busy machine.
        expect(self.page.get_by_role("heading", level=1).first).to_contain_text("HeteroFlow API", timeout=30_000)
        self.page.wait_for_load_state("networkidle")
        assert errors == []
