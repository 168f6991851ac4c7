"""Every htmx form of the console answers a bad value with a visible error beside the field, never silence."""

import pytest
from playwright.sync_api import expect

from nodes.models import Node
from scheduling.models import PluginConfig
from tests.browser.live import LiveConsoleTestCase
from tests.factories import make_node


@pytest.mark.browser
class FormErrorTests(LiveConsoleTestCase):
    def submit_bad_value(self, form: str, fill, button: str) -> None:
        fill()
        self.page.click(f"{form} {button}")

    def test_every_htmx_form_shows_its_error_beside_the_field(self):
        node = make_node(cards=8, labels={"team": "vision"})
        PluginConfig.objects.update_or_create(name="binpack", defaults={"enabled": True, "weight": 1})
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/{node.id}/")

        self.page.fill("input[name=region]", "eu-west")
        self.page.click("#topology-form button[type=submit]")
        expect(self.page.locator("#topology-saved")).to_be_visible()
        self.page.fill("input[name=region]", "r" * 200)
        self.page.click("#topology-form button[type=submit]")
        expect(self.page.locator("#topology-form .field-error[data-field=region]")).to_contain_text("at most")
        expect(self.page.locator("#topology-saved")).to_have_count(0)

        self.page.locator("#labels-form input[name=label_key]").first.fill("k" * 70)
        self.page.click("#labels-form button[type=submit]")
        expect(self.page.locator("#labels-form .field-error[data-field=label_key]")).to_contain_text(
            "label keys are 1–63 characters")
        self.page.locator("#labels-form input[name=label_key]").first.fill("team")
        self.page.locator("#labels-form button:has-text('+ Add label')").click()
        self.page.locator("#labels-form input[name=label_key]").nth(1).fill("team")
        self.page.click("#labels-form button[type=submit]")
        expect(self.page.locator("#labels-form .field-error[data-field=label_key]")).to_contain_text(
            "the key team is already given above")

        self.page.fill("textarea[name=taints]", "pool=big:NoSchedule\ngpu=a100")
        self.page.click("#taints-form button[type=submit]")
        error = self.page.locator("#taints-form .field-error[data-field=taints]")
        expect(error).to_contain_text("line 2 (gpu=a100): the effect (after ':') must be NoSchedule or "
                                      "PreferNoSchedule")
        expect(error).not_to_contain_text("taints[")

        self.page.evaluate("document.querySelector('#id_dedicated_tenant').add(new Option('gone', '999999'))")
        self.page.select_option("#id_dedicated_tenant", "999999")
        expect(self.page.locator("#settings-form .field-error[data-field=dedicated_tenant]")).to_contain_text(
            "no longer exists")
        self.shot("node-form-errors")
        stored = Node.objects.get(id=node.id)
        assert (stored.region, stored.labels, stored.taints, stored.dedicated_tenant_id) == (
            "eu-west", {"team": "vision"}, [], None)

        self.page.goto(f"{self.live_server_url}/plugins/")
        weight = self.page.locator("#plugin-binpack input[name=weight]")
        weight.fill("500")
        self.page.locator("#plugin-binpack .plugin-weight button[type=submit]").click()
        assert "100" in weight.evaluate("input => input.validationMessage")  # the browser's own bubble first
        weight.evaluate("input => { input.form.noValidate = true; }")
        self.page.locator("#plugin-binpack .plugin-weight button[type=submit]").click()
        expect(self.page.locator("#plugin-binpack .plugin-weight .field-error")).to_contain_text("0 to 100")
        self.page.fill("#target-webhook", "not a url")
        self.page.locator("#channel-webhook button:has-text('Save')").click()
        expect(self.page.locator("#channel-webhook .field-error")).to_be_visible()
        assert PluginConfig.objects.get(name="binpack").weight == 1

        self.page.goto(f"{self.live_server_url}/sharing/")
        self.page.click("#new-cohort button[type=submit]")
        expect(self.page.locator("#new-cohort .field-error").first).to_be_visible()

    def test_a_refusal_the_form_has_no_place_for_is_said_in_the_alert_bar(self):
        node = make_node(cards=8)
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/{node.id}/")
        Node.objects.filter(id=node.id).delete()
        self.page.fill("input[name=region]", "eu-west")
        self.page.click("#topology-form button[type=submit]")
        expect(self.page.locator("#console-alert")).to_contain_text("Not saved: the server answered 404")
