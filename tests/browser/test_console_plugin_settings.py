"""The plugin page's settings are typed fields made from each plugin's settings schema, refusals beside the field."""

import pytest
from playwright.sync_api import expect

from scheduling.models import PluginConfig
from scheduling.plugins.defrag import MAX_MOVES_LIMIT
from tests.browser.live import LiveConsoleTestCase


@pytest.mark.browser
class PluginSettingsTests(LiveConsoleTestCase):
    def test_a_number_out_of_bounds_is_refused_beside_its_field_and_a_valid_one_is_saved(self):
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/plugins/")
        form = self.page.locator("#settings-defrag")
        max_moves = form.locator("input[name=setting-max_moves]")
        expect(max_moves).to_have_attribute("type", "number")
        expect(max_moves).to_have_attribute("max", str(MAX_MOVES_LIMIT))
        expect(self.page.locator("#settings-preempt select[name=setting-preempt_stage]")).to_be_visible()
        expect(self.page.get_by_text("Always on: the scheduler needs it")).to_have_count(1)

        max_moves.fill(str(MAX_MOVES_LIMIT + 1))
        form.get_by_role("button", name="Save settings").click()
        error = self.page.locator("#field-defrag-max_moves .field-error")
        expect(error).to_contain_text(f"from 1 to {MAX_MOVES_LIMIT}")
        expect(self.page.locator("#field-defrag-moves_per_hour .field-error")).to_have_count(0)
        expect(self.page.locator("#settings-defrag input[name=setting-max_moves]")).to_have_value(
            str(MAX_MOVES_LIMIT + 1))
        self.shot("plugin-settings-error")
        assert not PluginConfig.objects.filter(name="defrag").exists()

        self.page.locator("#settings-defrag input[name=setting-max_moves]").fill("2")
        self.page.locator("#settings-defrag").get_by_role("button", name="Preview").click()
        expect(self.page.locator("#what-if-result")).to_be_visible()
        expect(self.page.locator("#what-if-defrag input[name=settings-defrag]")).to_have_value(
            '{"max_moves": 2, "moves_per_hour": 20}')
        assert not PluginConfig.objects.filter(name="defrag").exists()
        self.page.locator("#settings-defrag").get_by_role("button", name="Save settings").click()
        expect(self.page.locator("#field-defrag-max_moves .field-error")).to_have_count(0)
        expect(self.page.locator("#plugin-history")).to_contain_text("max_moves")
        assert PluginConfig.objects.get(name="defrag").extra["max_moves"] == 2
