"""The console's lists at scale: every task reachable, searched and sorted, live rows that respect the filter."""

import pytest
from playwright.sync_api import expect

from scheduling.models import Task
from scheduling.services.task_transition import task_transition
from tenants.models import Tenant
from tests.browser.live import LiveConsoleTestCase
from tests.factories import make_node, make_task


@pytest.mark.browser
class TaskListTests(LiveConsoleTestCase):
    def test_every_task_is_reachable_searchable_and_sortable(self):
        other = Tenant.objects.create(name="globex")
        Task.objects.bulk_create([Task(tenant=self.tenant, name=f"sweep-{index:03}") for index in range(1, 213)])
        oldest_first = Task.objects.order_by("id").first()
        make_task(tenant=other, name="globex-eval", reason="no node has 4 free nvidia cards")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/tasks/")
        expect(self.page.locator("#task-count")).to_have_text("Tasks 1–100 of 213")
        self.page.click("#tasks-next")
        self.page.click("#tasks-next")
        expect(self.page.locator("#task-count")).to_have_text("Tasks 201–213 of 213")
        expect(self.page.locator(f"#task-row-{oldest_first.id}")).to_be_visible()

        self.page.goto(f"{self.live_server_url}/tasks/")
        self.page.fill("#f-q", "globex")
        expect(self.page.locator("#task-count")).to_have_text("Tasks 1–1 of 1")
        expect(self.page.locator("#task-rows")).to_contain_text("no node has 4 free nvidia cards")
        self.shot("task-list-search")

        self.page.goto(f"{self.live_server_url}/tasks/")
        self.page.click("a.sort:has-text('Task')")
        expect(self.page.locator("#task-rows tr").first).to_contain_text("globex-eval")
        self.page.click("a.sort:has-text('Task')")
        expect(self.page.locator("#task-rows tr").first).to_contain_text("sweep-212")
        self.page.click("a.sort:has-text('Tenant')")
        expect(self.page.locator("#task-rows tr").first).to_contain_text("acme")

    def test_live_rows_respect_the_status_filter(self):
        node = make_node(cards=8)
        watched = make_task(tenant=self.tenant, name="watched")
        off_page = make_task(tenant=self.tenant, name="elsewhere", status="running", node=node)
        errors = []
        self.sign_in("admin", "admin-password")
        self.page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        with self.page.expect_websocket(lambda ws: ws.url.endswith("/ws/tasks/")) as socket_info:
            self.page.goto(f"{self.live_server_url}/tasks/?status=pending")
        socket = socket_info.value
        expect(self.page.locator(f"#task-row-{watched.id}")).to_be_visible()
        self.page.wait_for_timeout(300)  # let the consumer join its group before the change is announced
        with socket.expect_event("framereceived", timeout=5000):
            assert task_transition(watched.id, "pending", "scheduled", node=node)
            assert task_transition(off_page.id, "running", "succeeded")
        expect(self.page.locator(f"#task-row-{watched.id}")).to_have_count(0)
        self.page.wait_for_timeout(300)
        assert not [text for text in errors if "oob" in text.lower()], errors


@pytest.mark.browser
class NodeAndGroupListTests(LiveConsoleTestCase):
    def test_nodes_are_searched_and_those_needing_attention_come_first(self):
        make_node(cards=8, name="a-healthy")
        make_node(cards=8, name="b-cordoned", schedulable=False)
        make_node(cards=8, name="z-offline", status="offline")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/")
        rows = self.page.locator("#node-table tbody tr")
        expect(rows.nth(0)).to_contain_text("z-offline")
        expect(rows.nth(1)).to_contain_text("b-cordoned")
        self.page.select_option("#f-sort", "name")
        expect(rows.nth(0)).to_contain_text("a-healthy")
        self.page.fill("#f-q", "cordon")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("b-cordoned")
        self.shot("node-list-search")

    def test_the_groups_list_shows_and_searches_every_group(self):
        from scheduling.models import TaskGroup

        TaskGroup.objects.create(tenant=self.tenant, name="llama-pretrain", type="training", world_size=4)
        TaskGroup.objects.create(tenant=self.tenant, name="chat-serving", type="inference", replicas=2)
        self.sign_in("alice", "tenant-password")
        self.page.click("nav a:has-text('Task groups')")
        expect(self.page.locator("#group-count")).to_have_text("Groups 1–2 of 2")
        self.page.fill("#g-q", "llama")
        expect(self.page.locator("#group-rows tr")).to_have_count(1)
        expect(self.page.locator("#group-rows")).to_contain_text("4 workers")
        self.shot("group-list")
