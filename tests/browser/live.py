"""The live server and browser the console's end-to-end tests share."""

import os
from pathlib import Path

from channels.layers import channel_layers
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from playwright.sync_api import sync_playwright

from tenants.models import Tenant
from tenants.services import tenant_user_create
from tests.browser import chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class LiveConsoleTestCase(ChannelsLiveServerTestCase):
    """A console served by daphne to headless Chromium, with a tenant user (alice) and an admin."""

    host = "127.0.0.1"

    @classmethod
    def setUpClass(cls):
        executable = chromium.required_chromium_path()  # before any server starts: a missing browser leaves nothing
        # pytest-django already points NAME at the test database; keep the server process on that same name.
        test_settings = settings.DATABASES["default"].setdefault("TEST", {})
        cls._previous_test_name = test_settings.get("NAME")
        test_settings["NAME"] = settings.DATABASES["default"]["NAME"]
        # The forked server must open its own Redis connections, not reuse this process's.
        channel_layers.backends.clear()
        super().setUpClass()
        ARTIFACTS.mkdir(exist_ok=True)
        # Playwright's sync API keeps an event loop in this thread; the ORM calls here are still plain sync code.
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        cls._playwright = sync_playwright().start()
        cls._browser = cls._playwright.chromium.launch(executable_path=executable, headless=True,
                                                        args=chromium.ARGS)

    @classmethod
    def tearDownClass(cls):
        cls._browser.close()
        cls._playwright.stop()
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        super().tearDownClass()
        settings.DATABASES["default"]["TEST"]["NAME"] = cls._previous_test_name

    def setUp(self):
        from django.contrib.auth import get_user_model

        self.tenant = Tenant.objects.create(name="acme")
        tenant_user_create(tenant=self.tenant, username="alice", password="tenant-password")
        self.admin = get_user_model().objects.create_user(username="admin", password="admin-password",
                                                          is_staff=True)
        self.context = self._browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()

    def tearDown(self):
        self.context.close()

    def sign_in(self, username: str, password: str) -> None:
        self.page.goto(f"{self.live_server_url}/login/")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", password)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{self.live_server_url}/")

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
