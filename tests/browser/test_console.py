"""End-to-end scenarios in headless Chromium against a real ASGI server (daphne, with websockets)."""

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect
from knox.models import AuthToken

from nodes.models import Node
from scheduling.models import CycleRecord, Task
from tests.browser.live import LiveConsoleTestCase
from tests.browser.pages import product_pages
from tests.factories import make_node, make_task


@pytest.mark.browser
class ConsoleBrowserTests(LiveConsoleTestCase):
    def test_tenant_submits_the_job_form_with_an_error_then_correctly(self):
        self.sign_in("alice", "tenant-password")
        self.shot("dashboard-tenant")
        self.page.goto(f"{self.live_server_url}/tasks/new/")
        self.page.fill("input[name=name]", "bert-finetune")
        self.page.fill("input[name=gpu_required]", "-1")
        self.page.click("button:has-text('Submit job')")
        error = self.page.locator(".field.has-error .field-error[data-field=gpu_required]")
        expect(error).to_be_visible()
        self.shot("job-form-error")
        assert not Task.objects.exists()

        self.page.fill("input[name=gpu_required]", "1")
        self.page.fill("input[name=label_key]", "nvlink")
        self.page.fill("input[name=label_value]", "required")
        self.page.click("button:has-text('Submit job')")
        self.page.wait_for_url(re.compile(r"/tasks/\d+/$"))
        task = Task.objects.get()
        assert self.page.url.endswith(f"/tasks/{task.id}/")
        assert (task.name, task.gpu_required, task.labels) == ("bert-finetune", 1, {"nvlink": "required"})
        self.shot("task-detail")
        self.page.goto(f"{self.live_server_url}/tasks/")
        expect(self.page.locator(f"#task-row-{task.id}")).to_contain_text("bert-finetune")
        self.shot("task-list")

    def test_admin_sets_the_node_topology_through_htmx(self):
        node = make_node(cards=8, numa=[0, 0, 0, 0, 1, 1, 1, 1],
                         labels={"heteroflow.io/gpu-topology":
                                 "nv=0-1,1-2,2-3,4-5,5-6,6-7;numa=0:0,1:0,2:0,3:0,4:1,5:1,6:1,7:1"})
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/nodes/{node.id}/")
        self.page.evaluate("window.__notReloaded = true")
        self.page.fill("input[name=region]", "eu-west")
        self.page.fill("input[name=zone]", "eu-west-1a")
        self.page.fill("input[name=rack]", "r12")
        self.page.click("button:has-text('Save placement')")
        expect(self.page.locator("#topology-saved")).to_be_visible()
        assert self.page.evaluate("window.__notReloaded") is True
        self.shot("node-detail")

        token = AuthToken.objects.create(user=self.admin)[1]
        response = self.page.request.get(f"{self.live_server_url}/api/v1/nodes/{node.id}",
                                          headers={"Authorization": f"Token {token}"})
        assert response.ok
        body = response.json()
        assert (body["region"], body["zone"], body["rack"]) == ("eu-west", "eu-west-1a", "r12")
        assert Node.objects.filter(id=node.id, region="eu-west", zone="eu-west-1a", rack="r12").exists()

        self.page.goto(f"{self.live_server_url}/nodes/")
        self.page.select_option("select[name=region]", "eu-west")
        expect(self.page.locator("#node-table")).to_contain_text(node.name)
        self.shot("node-list")

    def test_tenant_is_refused_the_plugins_page(self):
        self.sign_in("alice", "tenant-password")
        response = self.page.goto(f"{self.live_server_url}/plugins/")
        assert response.status == 403

    def test_diagnostics_receives_a_cycle_pushed_by_the_server(self):
        make_node(cards=8)
        make_task(tenant=self.tenant, name="queued", gpu_required=2)
        self.sign_in("admin", "admin-password")
        with self.page.expect_websocket(lambda ws: ws.url.endswith("/ws/diagnostics/")) as socket_info:
            self.page.goto(f"{self.live_server_url}/diagnostics/")
        socket = socket_info.value
        expect(self.page.locator(".cycle-row")).to_have_count(0)
        self.page.wait_for_timeout(300)  # let the consumer join its group before the cycle is announced

        token = AuthToken.objects.create(user=self.admin)[1]
        with socket.expect_event("framereceived", timeout=5000):
            response = self.page.request.post(f"{self.live_server_url}/api/v1/scheduler/cycles",
                                              headers={"Authorization": f"Token {token}"})
        assert response.ok, response.text()
        cycle = CycleRecord.objects.get()
        expect(self.page.locator(f"#cycle-{cycle.id}")).to_be_visible(timeout=5000)
        assert Task.objects.get().status == "scheduled"
        self.shot("diagnostics")

    def test_task_output_reaches_the_log_panel_live(self):
        from nodes.services import agent_register
        from scheduling.services.task_transition import task_transition

        node, node_token = agent_register(name="gpu-logs", internal_ip="10.0.9.1/24", public_ip=None, cpu_cores=8,
                                          memory_gb=64)
        task = make_task(tenant=self.tenant, name="trainer")
        assert task_transition(task.id, "pending", "scheduled", node=node)
        ship = f"{self.live_server_url}/api/v1/agent/tasks/{task.id}/logs"
        headers = {"Authorization": f"Token {node_token}", "Content-Type": "text/plain"}
        assert self.page.request.post(ship, headers=headers, data="epoch 1 loss 2.31\n").ok
        self.sign_in("alice", "tenant-password")
        with self.page.expect_websocket(lambda ws: ws.url.endswith(f"/ws/tasks/{task.id}/logs/")) as socket_info:
            self.page.goto(f"{self.live_server_url}/tasks/{task.id}/")
        socket = socket_info.value
        expect(self.page.locator("#task-log-lines")).to_contain_text("epoch 1 loss 2.31")
        self.page.wait_for_timeout(300)  # let the consumer join its group before the batch is announced
        with socket.expect_event("framereceived", timeout=5000):
            assert self.page.request.post(ship, headers=headers, data="epoch 2 loss 1.87\n").ok
        expect(self.page.locator("#task-log-lines")).to_contain_text("epoch 1 loss 2.31\nepoch 2 loss 1.87",
                                                                     timeout=5000)
        self.shot("task-log")

    def test_admin_enables_binpack_on_the_plugins_page(self):
        from scheduling.models import PluginConfig

        PluginConfig.objects.update_or_create(name="binpack", defaults={"enabled": False, "weight": 0})
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/plugins/")
        self.page.evaluate("window.__notReloaded = true")
        self.page.locator("#plugin-binpack input[type=checkbox][name=enabled]").check()
        expect(self.page.locator("#plugin-binpack .switch-state")).to_have_text("On")
        assert self.page.evaluate("window.__notReloaded") is True
        assert PluginConfig.objects.get(name="binpack").enabled is True
        self.shot("plugins")

    def test_no_page_loads_anything_from_another_host(self):
        node = make_node(cards=8)
        task = make_task(tenant=self.tenant, name="queued", gpu_required=1)
        self.sign_in("admin", "admin-password")
        requested, blocked = [], {}
        self.page.on("request", lambda request: requested.append(request.url))
        self.page.on("websocket", lambda socket: requested.append(socket.url))
        self.page.on("requestfailed", lambda request: blocked.setdefault(request.url, request.failure))
        pages = product_pages({"task_id": task.id, "node_id": node.id})
        assert {"/", "/tasks/", f"/tasks/{task.id}/", f"/nodes/{node.id}/", "/api/schema/docs/"} <= set(pages)

        for page in pages:
            response = self.page.goto(f"{self.live_server_url}{page}")
            assert response.ok, f"{page}: {response.status}"
            self.page.wait_for_load_state("networkidle")
            if page == "/api/schema/docs/":
                expect(self.page.locator(".swagger-ui .info .title")).to_contain_text("HeteroFlow API")
            if page == "/api/schema/redoc/":
                expect(self.page.locator("redoc h1").first).to_contain_text("HeteroFlow API")

        own_host = urlsplit(self.live_server_url).netloc
        network = [url for url in requested if urlsplit(url).scheme in {"http", "https", "ws", "wss"}]
        assert len(network) > len(pages)
        # A request the page's own Content-Security-Policy stops never leaves the browser.
        leaving = [url for url in network if urlsplit(url).netloc != own_host
                   and blocked.get(url) != "csp"]
        assert leaving == [], blocked


    def test_admin_previews_enabling_binpack_sees_the_moved_tasks_then_saves(self):
        from scheduling.models import PluginConfig

        PluginConfig.objects.update_or_create(name="spread", defaults={"enabled": True, "weight": 1})
        PluginConfig.objects.update_or_create(name="binpack", defaults={"enabled": False, "weight": 0})
        for name in ("node-a", "node-b"):
            make_node(cards=8, name=name)
        for index in range(6):
            make_task(tenant=self.tenant, gpu_required=1, name=f"job-{index}")
        self.sign_in("admin", "admin-password")
        self.page.goto(f"{self.live_server_url}/plugins/")
        self.page.evaluate("window.__notReloaded = true")

        self.page.select_option("select[name=action-binpack]", "enable")
        self.page.click("#what-if-card button[value=what-if]")
        moved = self.page.locator("#moved-tasks tbody tr")
        expect(moved).to_have_count(3)
        expect(self.page.locator("#what-if-result")).to_contain_text("3 would move")
        self.shot("plugins-what-if-preview")
        assert PluginConfig.objects.get(name="binpack").enabled is False

        self.page.click("#what-if-card button[value=what-if-save]")
        expect(self.page.locator("#what-if-card .saved-note")).to_contain_text("Saved binpack")
        expect(self.page.locator("#plugin-binpack .switch-state")).to_have_text("On")
        expect(self.page.locator("#plugin-spread .switch-state")).to_have_text("Off")
        assert self.page.evaluate("window.__notReloaded") is True
        assert PluginConfig.objects.get(name="binpack").enabled is True
        assert PluginConfig.objects.get(name="spread").enabled is False

    def test_tenant_changes_the_usage_range_and_the_report_is_swapped_in(self):
        from datetime import timedelta

        from django.utils import timezone

        from scheduling.models import UsageRecord

        today = timezone.now().date()
        for days_ago, gpu_type, hours in ((1, "nvidia", 30), (1, "ascend", 12), (2, "nvidia", 20), (40, "nvidia", 5)):
            UsageRecord.objects.create(tenant=self.tenant, day=today - timedelta(days=days_ago), gpu_type=gpu_type,
                                       task_type="batch", card_seconds=hours * 3600)
        self.sign_in("alice", "tenant-password")
        self.page.goto(f"{self.live_server_url}/usage/")
        self.page.evaluate("window.__notReloaded = true")
        expect(self.page.locator("#usage-chart .usage-day")).to_have_count(30)

        self.page.fill("input[name=from]", str(today - timedelta(days=45)))
        self.page.click("#usage-report button[type=submit]")

        expect(self.page.locator("#usage-chart .usage-day")).to_have_count(46)
        expect(self.page.locator("#usage-table tbody tr")).to_have_count(4)
        expect(self.page.locator("#usage-table")).to_contain_text(f"{today - timedelta(days=40)}5.00")
        assert self.page.evaluate("window.__notReloaded") is True
        self.shot("usage-page")

        self.page.fill("input[name=from]", str(today + timedelta(days=3)))
        self.page.click("#usage-report button[type=submit]")
        expect(self.page.locator('.field-error[data-field="from"]')).to_contain_text("after")
