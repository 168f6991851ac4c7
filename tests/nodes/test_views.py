import pytest

from nodes.models import GPU, Node, NodeAuditEntry
from nodes import views as node_views
from nodes.services import agent_register
from tests.factories import make_node, make_task
from tests.web_clients import HTMX


@pytest.mark.django_db
def test_node_list_filters_and_serves_the_table_fragment(admin_web):
    make_node(name="nv-1", gpu_type="nvidia", region="eu")
    make_node(name="asc-1", gpu_type="ascend", region="us")
    page = admin_web.get("/nodes/").content.decode()
    assert "nv-1" in page and "asc-1" in page and 'class="bar' in page
    fragment = admin_web.get("/nodes/?gpu_type=ascend", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="node-table"')
    assert "asc-1" in fragment and "nv-1" not in fragment
    by_region = admin_web.get("/nodes/?region=eu", **HTMX).content.decode()
    assert "nv-1" in by_region and "asc-1" not in by_region


@pytest.mark.django_db
def test_node_list_reports_an_invalid_filter(admin_web):
    make_node(name="nv-1")
    fragment = admin_web.get("/nodes/?status=melting", **HTMX).content.decode()
    assert "<code>status</code>" in fragment and "nv-1" not in fragment


@pytest.mark.django_db
def test_node_page_shows_cards_tasks_and_topology(admin_web, tenant):
    node = make_node(cards=4, numa=[0, 0, 1, 1], labels={"heteroflow.io/gpu-topology": "nv=0-1,2-3;numa=0:0,1:0,2:1,3:1"})
    task = make_task(tenant=tenant, name="on-card-1", status="running", node=node, gpus=[1], gpu_required=1)
    page = admin_web.get(f"/nodes/{node.id}/").content.decode()
    assert f'href="/tasks/{task.id}/">on-card-1' in page
    nvlink = page[page.index('id="nvlink-diagram"'):page.index('id="numa-diagram"')]
    assert nvlink.count("domain ") == 2 and nvlink.count(">GPU") == 4
    numa = page[page.index('id="numa-diagram"'):]
    assert "NUMA 0" in numa and "NUMA 1" in numa
    for name in ("region", "zone", "rack"):
        assert f'name="{name}"' in page


@pytest.mark.django_db
def test_node_page_counts_fractional_tasks_as_their_share_and_shows_memory_in_gb(admin_web, tenant):
    node = make_node(cards=8, memory_mb=81920, gpu_used=1, memory_used_mb=123456)
    make_task(tenant=tenant, status="running", node=node, gpus=[1], gpu_required=1, card_type="nvidia")
    for _ in range(3):
        make_task(tenant=tenant, status="running", node=node, gpus=[0], gpu_memory_mb=20480, card_type="nvidia",
                  shard={"card": 0, "memory_limit_mb": 20480, "compute_percent": 25})
    GPU.objects.filter(node=node, index=0).update(memory_used_mb=61440)

    page = admin_web.get(f"/nodes/{node.id}/").content.decode()

    # The ledger's whole card and three quarter-card shares, two decimals at most.
    assert '<div class="value" id="cards-held">1.75<span' in page
    assert page.count('<span class="card-share">0.25 card</span>') == 3
    assert '<small class="card-memory">60/80 GB</small>' in page and "MB</small>" not in page
    assert '<small id="node-memory">121 of 512 GB</small>' in page


@pytest.mark.django_db
def test_the_node_list_counts_fractional_tasks_as_their_share_like_the_node_page(admin_web, tenant):
    node = make_node(cards=8, memory_mb=81920, gpu_used=1)
    make_task(tenant=tenant, status="running", node=node, gpus=[1], gpu_required=1, card_type="nvidia")
    for _ in range(3):
        make_task(tenant=tenant, status="running", node=node, gpus=[0], gpu_memory_mb=20480, card_type="nvidia",
                  shard={"card": 0, "memory_limit_mb": 20480, "compute_percent": 25})
    make_task(tenant=tenant, status="succeeded", node=node, gpus=[2], gpu_memory_mb=20480, card_type="nvidia",
              shard={"card": 2, "memory_limit_mb": 20480, "compute_percent": 25})
    idle = make_node(cards=4)

    page = admin_web.get("/nodes/").content.decode()

    row = page[page.index(f'href="/nodes/{node.id}/"'):]
    assert '<span style="width:22%"></span></div><small>1.75/8</small>' in row[:row.index("</tr>")]
    idle_row = page[page.index(f'href="/nodes/{idle.id}/"'):]
    assert "<small>0/4</small>" in idle_row[:idle_row.index("</tr>")]


@pytest.mark.django_db
def test_the_drain_button_asks_first(admin_web):
    node = make_node(cards=2)

    page = admin_web.get(f"/nodes/{node.id}/").content.decode()

    drain_form = page[page.index('<div id="drain-panel">'):page.index("Drain node</button>")]
    assert f'hx-confirm="Drain {node.name}? It is cordoned and every task on it is stopped' in drain_form


@pytest.mark.django_db
def test_node_page_without_topology_label_says_so(admin_web):
    node = make_node(cards=2)
    assert "No NVLink topology reported" in admin_web.get(f"/nodes/{node.id}/").content.decode()


@pytest.mark.django_db
def test_topology_form_saves_through_htmx_and_returns_the_fragment(admin_web, admin_user):
    node = make_node(cards=1)
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "topology", "region": "eu-west", "zone": "a",
                                                      "rack": "r7"}, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200
    assert fragment.lstrip().startswith('<form id="topology-form"') and "Saved" in fragment
    node.refresh_from_db()
    assert (node.region, node.zone, node.rack) == ("eu-west", "a", "r7")
    assert NodeAuditEntry.objects.get(node=node).actor == admin_user


@pytest.mark.django_db
def test_topology_form_refuses_a_too_long_value_beside_the_field(admin_web):
    node = make_node(cards=1)
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "topology", "region": "x" * 101, "zone": "",
                                                      "rack": ""}, **HTMX)
    assert response.status_code == 400
    assert 'class="field-error"' in response.content.decode()
    node.refresh_from_db()
    assert node.region == ""


@pytest.mark.django_db
def test_labels_editor_replaces_admin_labels_and_keeps_agent_ones(admin_web):
    node = make_node(cards=1, labels={"heteroflow.io/gpu-topology": "nv=;numa=0:0", "old": "1"})
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "labels", "label_key": ["rdma", ""],
                                                      "label_value": ["yes", ""]}, **HTMX)
    assert response.status_code == 200 and "Saved" in response.content.decode()
    node.refresh_from_db()
    assert node.labels == {"rdma": "yes", "heteroflow.io/gpu-topology": "nv=;numa=0:0"}


@pytest.mark.django_db
def test_labels_editor_refuses_agent_keys(admin_web):
    node = make_node(cards=1)
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "labels", "label_key": ["heteroflow.io/x"],
                                                      "label_value": ["1"]}, **HTMX)
    assert response.status_code == 400 and "set by the node agent" in response.content.decode()
    node.refresh_from_db()
    assert node.labels == {}


@pytest.mark.django_db
def test_settings_form_cordons_and_dedicates(admin_web, tenant):
    node = make_node(cards=1)
    admin_web.post(f"/nodes/{node.id}/", {"form": "settings", "dedicated_tenant": str(tenant.id)}, **HTMX)
    node.refresh_from_db()
    assert node.schedulable is False and node.dedicated_tenant == tenant
    admin_web.post(f"/nodes/{node.id}/", {"form": "settings", "schedulable": "on", "dedicated_tenant": ""}, **HTMX)
    node.refresh_from_db()
    assert node.schedulable is True and node.dedicated_tenant is None
    assert Node.objects.count() == 1


@pytest.mark.django_db
def test_a_mixed_node_shows_each_type_on_the_list_and_its_page(admin_web):
    node = make_node(name="mixed-1", cards=2)
    GPU.objects.bulk_create(GPU(node=node, index=i, uuid=f"npu-{i}", type="ascend", model="Ascend910B",
                                memory_total_mb=65536, numa=i) for i in range(2))

    listed = admin_web.get("/nodes/").content.decode()
    assert "2 × ascend" in listed and "2 × nvidia" in listed
    page = admin_web.get(f"/nodes/{node.id}/").content.decode()
    assert "2 × ascend + 2 × nvidia" in page
    # Both vendors have a card 0: the page names each by type and index.
    assert "ascend 0" in page and "nvidia 0" in page


def _joined_node(name: str) -> Node:
    node, _token = agent_register(name=name, internal_ip="10.0.0.9", public_ip=None, cpu_cores=8, memory_gb=32,
                                  by_join_token=True)
    return node


@pytest.mark.django_db
def test_a_node_the_join_token_registered_awaits_approval_on_its_page_and_the_list(admin_web, settings, admin_user):
    """issue 27 item 3: the page said only "cordoned", with no way to tell a node nobody approved yet."""
    settings.HETEROFLOW_JOIN_AUTO_APPROVE = False
    joined = _joined_node("joined")
    cordoned = make_node(name="cordoned", schedulable=False)

    listed = admin_web.get("/nodes/").content.decode()
    assert listed.count("awaiting approval") == 1
    assert 'id="approve-node"' in admin_web.get(f"/nodes/{joined.id}/").content.decode()
    assert 'id="approve-node"' not in admin_web.get(f"/nodes/{cordoned.id}/").content.decode()

    response = admin_web.post(f"/nodes/{joined.id}/", {"form": "approve"}, **HTMX)

    assert response.status_code == 200
    assert "Approved: the node is schedulable" in response.content.decode()
    assert "<html" not in response.content.decode()
    joined.refresh_from_db()
    assert joined.schedulable
    entry = joined.audit_entries.first()
    assert (entry.action, entry.actor, entry.after) == ("node.approve", admin_user, {"schedulable": True})
    assert "awaiting approval" not in admin_web.get("/nodes/").content.decode()


@pytest.mark.django_db
def test_a_node_cordoned_after_its_approval_no_longer_awaits_it(admin_web, settings):
    settings.HETEROFLOW_JOIN_AUTO_APPROVE = False
    joined = _joined_node("joined")
    admin_web.post(f"/nodes/{joined.id}/", {"form": "approve"}, **HTMX)
    admin_web.post(f"/nodes/{joined.id}/", {"form": "settings", "dedicated_tenant": ""}, **HTMX)
    joined.refresh_from_db()
    assert not joined.schedulable
    assert 'id="approve-node"' not in admin_web.get(f"/nodes/{joined.id}/").content.decode()


@pytest.mark.django_db
def test_only_staff_approve_a_node(tenant_web, settings):
    settings.HETEROFLOW_JOIN_AUTO_APPROVE = False
    joined = _joined_node("joined")
    assert tenant_web.post(f"/nodes/{joined.id}/", {"form": "approve"}, **HTMX).status_code in (302, 403)
    joined.refresh_from_db()
    assert not joined.schedulable


@pytest.mark.django_db
def test_the_node_list_page_shows_a_page_of_nodes_at_a_time(admin_web, monkeypatch):
    """issue 27 item 10: the page drew every node of the cluster at once."""
    monkeypatch.setattr(node_views, "NODE_PAGE_SIZE", 2)
    for index in range(5):
        make_node(name=f"paged-node-{index}", region="eu")
    first = admin_web.get("/nodes/?region=eu").content.decode()
    # names no CSRF token can contain: it is alphanumeric and random, so "n2" appeared in one
    assert "paged-node-0" in first and "paged-node-1" in first and "paged-node-2" not in first
    assert 'id="nodes-next" href="/nodes/?region=eu&amp;page=2"' in first and "nodes-prev" not in first
    last = admin_web.get("/nodes/?region=eu&page=3", **HTMX).content.decode()
    assert "paged-node-4" in last and "paged-node-3" not in last and "page 3 of 3" in last and "nodes-next" not in last
