"""The console's details: a phone-sized sidebar, a favicon, confirmations, ReDoc without errors, named tokens, and
the node page's fractional cards and memory in GB."""

import pytest
from knox.models import AuthToken
from playwright.sync_api import expect

from nodes.models import GPU, Node
from tests.browser.live import LiveConsoleTestCase
from tests.factories import make_node, make_task


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

    def test_a_token_is_issued_with_a_name_and_listed_by_it(self):
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tokens/")
        self.page.fill("#issue-name", "x" * 64)
        self.page.evaluate("document.getElementById('issue-name').value += ' too long'")
        self.page.fill("#issue-password", "admin-password")
        self.page.click("#issue-token")
        expect(self.page.locator(".field-error[data-field=name]")).to_contain_text("at most 64")
        assert not AuthToken.objects.filter(user=self.admin).exists()

        self.page.fill("#issue-name", "laptop")
        self.page.fill("#issue-password", "admin-password")
        self.page.click("#issue-token")
        expect(self.page.locator("#issued-token-value")).to_be_visible()
        token = AuthToken.objects.get(user=self.admin)
        expect(self.page.locator(f"#token-{token.token_key} .token-name")).to_have_text("laptop")
        self.shot("tokens")

    def test_the_node_page_fits_fractional_cards_shows_gb_and_asks_before_draining(self):
        node = make_node(cards=8, memory_mb=81920, memory_used_mb=123456)
        for number in range(3):
            make_task(tenant=self.tenant, name=f"a-fractional-task-with-a-rather-long-name-{number}", status="running",
                      node=node, gpus=[0], gpu_memory_mb=20480, card_type="nvidia",
                      shard={"card": 0, "memory_limit_mb": 20480, "compute_percent": 25})
        GPU.objects.filter(node=node, index=0).update(memory_used_mb=61440)
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/{node.id}/")

        expect(self.page.locator("#cards-held")).to_have_text("0.75 / 8")
        expect(self.page.locator("#node-memory")).to_have_text("121 of 512 GB")
        first_card = self.page.locator("#cards tbody tr").first
        expect(first_card.locator(".card-memory")).to_have_text("60/80 GB")
        cell = first_card.locator(".card-tasks").bounding_box()
        for tag in first_card.locator(".card-tasks .tag").all():
            box = tag.bounding_box()
            assert box["x"] + box["width"] <= cell["x"] + cell["width"] + 0.5, "a task's tag overflows its cell"
        expect(first_card.locator(".card-share")).to_have_text(["0.25 card"] * 3)

        asked = []
        self.page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        self.page.click("#drain-panel button:has-text('Drain node')")
        expect(self.page.locator("#drain-panel button:has-text('Drain node')")).to_be_visible()
        assert asked and asked[0].startswith(f"Drain {node.name}?")
        assert Node.objects.get(id=node.id).drain_state == ""
        self.page.once("dialog", lambda dialog: dialog.accept())
        self.page.click("#drain-panel button:has-text('Drain node')")
        expect(self.page.locator("#drain-state")).to_contain_text("Draining")
        self.shot("node-fractional")

    def test_redoc_shows_the_api_without_console_errors(self):
        self.sign_in("admin", "admin-password")
        errors = []
        self.page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        self.page.goto(f"{self.live_server_url}/api/schema/redoc/")
        # ReDoc renders the whole schema in the browser before its title shows: seconds on a busy machine.
        expect(self.page.get_by_role("heading", level=1).first).to_contain_text("HeteroFlow API", timeout=30_000)
        self.page.wait_for_load_state("networkidle")
        assert errors == []
