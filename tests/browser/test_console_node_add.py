"""Adding a node from the console: the agent's command line with the join token, and the approval queue."""

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from nodes.models import Node
from nodes.services import agent_register
from tests.browser.live import LiveConsoleTestCase

JOIN_TOKEN = "console-join-token-of-at-least-32-characters"


@pytest.mark.browser
@override_settings(HETEROFLOW_JOIN_TOKEN=JOIN_TOKEN)  # on the class: the server process is forked with it
class NodeAddTests(LiveConsoleTestCase):
    def test_the_admin_copies_the_command_line_then_approves_the_node(self):
        node, _ = agent_register(name="gpu-new-1", internal_ip="10.3.0.9/24", public_ip=None, cpu_cores=32,
                                 memory_gb=256, by_join_token=True)
        self.sign_in("admin", "admin-password")
        self.page.click("nav a:has-text('Add a node')")
        command = self.page.locator("#agent-command")
        expect(command).to_contain_text(f"python -m nodes.agent --server {self.live_server_url}")
        expect(command).to_contain_text("--join-token-file /etc/heteroflow/join-token")
        expect(self.page.locator("#join-command")).to_contain_text(JOIN_TOKEN)
        expect(self.page.locator(f"#awaiting-{node.id}")).to_contain_text("gpu-new-1")
        self.shot("node-add")
        self.page.locator(f"#awaiting-{node.id} button:has-text('Approve')").click()
        expect(self.page.locator("#approved-note")).to_contain_text("Approved gpu-new-1")
        expect(self.page.locator(f"#awaiting-{node.id}")).to_have_count(0)
        assert Node.objects.get(id=node.id).schedulable is True



@pytest.mark.browser
class NodeAddWithoutJoiningTests(LiveConsoleTestCase):
    def test_without_a_join_token_the_page_says_how_to_turn_joining_on(self):
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/add/")
        expect(self.page.locator("#joining-off")).to_contain_text("HETEROFLOW_JOIN_TOKEN")
        expect(self.page.locator("#agent-command")).to_have_count(0)

    def test_a_tenant_is_refused(self):
        self.sign_in("alice", "tenant-password")
        assert self.page.goto(f"{self.live_server_url}/nodes/add/").status == 403
