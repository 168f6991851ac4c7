import pytest
from rest_framework.test import APIClient

from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.models import GPU, Node, NodeAuditEntry
from nodes.services import node_heartbeat_apply
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.nodes.conftest import NV4_LABEL, card, heartbeat_body, node_client

REGISTER = "/api/v1/agent/register"
HEARTBEAT = "/api/v1/agent/heartbeat"
WORK = "/api/v1/agent/work"


def _status_url(task_id: int) -> str:
    return f"/api/v1/agent/tasks/{task_id}/status"


REGISTRATION = {"name": "gpu-b", "internal_ip": "10.0.3.8/24", "public_ip": "203.0.113.8", "cpu_cores": 32,
                "memory_gb": 256}


JOIN_SECRET = "cluster-join-secret-of-32-characters"


class TestRegister:
    def test_with_the_join_token(self, db, settings):
        settings.HETEROFLOW_JOIN_TOKEN = JOIN_SECRET
        response = node_client(JOIN_SECRET).post(REGISTER, REGISTRATION, format="json")
        assert response.status_code == 200, response.content
        node = Node.objects.get(id=response.json()["node_id"])
        assert (node.name, node.internal_ip, node.cpu_cores) == ("gpu-b", "10.0.3.8/24", 32)
        assert node_client(response.json()["token"]).get(WORK).status_code == 200

    def test_a_node_the_join_token_registered_waits_for_an_admins_approval(self, db, settings, admin_client):
        """design §16.5: unschedulable until an admin approves it by PATCH (or on its page), audited."""
        settings.HETEROFLOW_JOIN_TOKEN = JOIN_SECRET
        node_id = node_client(JOIN_SECRET).post(REGISTER, REGISTRATION, format="json").json()["node_id"]
        node = Node.objects.get(id=node_id)
        assert not node.schedulable
        assert node.audit_entries.get().action == "node.join"

        assert admin_client.patch(f"/api/v1/nodes/{node_id}", {"schedulable": True}, format="json").status_code == 200
        assert Node.objects.get(id=node_id).schedulable

    def test_join_auto_approve_makes_joined_nodes_schedulable_at_once(self, db, settings):
        settings.HETEROFLOW_JOIN_TOKEN, settings.HETEROFLOW_JOIN_AUTO_APPROVE = JOIN_SECRET, True
        node_id = node_client(JOIN_SECRET).post(REGISTER, REGISTRATION, format="json").json()["node_id"]
        assert Node.objects.get(id=node_id).schedulable

    def test_an_admin_registered_node_is_schedulable_at_once(self, admin_client):
        node_id = admin_client.post(REGISTER, REGISTRATION, format="json").json()["node_id"]
        assert Node.objects.get(id=node_id).schedulable

    def test_a_join_token_shorter_than_32_characters_registers_nothing(self, db, settings):
        settings.HETEROFLOW_JOIN_TOKEN = JOIN_SECRET[:31]
        assert node_client(JOIN_SECRET[:31]).post(REGISTER, REGISTRATION, format="json").status_code == 401
        assert not Node.objects.exists()

    def test_with_an_admin_token(self, admin_client):
        response = admin_client.post(REGISTER, REGISTRATION, format="json")
        assert response.status_code == 200
        assert set(response.json()) == {"node_id", "token"}

    def test_join_token_is_refused_when_the_setting_is_empty(self, db, settings):
        settings.HETEROFLOW_JOIN_TOKEN = ""
        assert node_client("").post(REGISTER, REGISTRATION, format="json").status_code == 401

    def test_bad_token_401_tenant_403(self, db, settings, tenant_client):
        settings.HETEROFLOW_JOIN_TOKEN = JOIN_SECRET
        assert node_client("wrong-secret").post(REGISTER, REGISTRATION, format="json").status_code == 401
        assert APIClient().post(REGISTER, REGISTRATION, format="json").status_code == 401
        assert tenant_client.post(REGISTER, REGISTRATION, format="json").status_code == 403
        assert not Node.objects.exists()

    def test_a_node_token_cannot_register_other_nodes(self, agent):
        assert agent.post(REGISTER, REGISTRATION, format="json").status_code == 403
        assert not Node.objects.filter(name=REGISTRATION["name"]).exists()

    def test_a_node_token_re_registers_its_own_node(self, agent, registered):
        node, old_token = registered
        response = agent.post(REGISTER, {**REGISTRATION, "name": node.name}, format="json")
        assert response.status_code == 200 and response.json()["node_id"] == node.id
        assert node_client(old_token).get(WORK).status_code == 401

    def test_the_join_token_cannot_take_over_an_existing_node(self, settings, registered, agent):
        settings.HETEROFLOW_JOIN_TOKEN = JOIN_SECRET
        node, token = registered
        response = node_client(JOIN_SECRET).post(
            REGISTER, {**REGISTRATION, "name": node.name, "internal_ip": "10.6.6.6/24"}, format="json")
        assert response.status_code == 403 and response.json()["code"] == "permission_denied"
        assert Node.objects.get(id=node.id).internal_ip == node.internal_ip
        assert agent.get(WORK).status_code == 200, "the node's own token still works"

    def test_re_registering_rotates_the_token(self, admin_client, registered):
        node, old_token = registered
        response = admin_client.post(REGISTER, {**REGISTRATION, "name": node.name}, format="json")
        assert response.json()["node_id"] == node.id
        assert node_client(old_token).get(WORK).status_code == 401
        assert node_client(response.json()["token"]).get(WORK).status_code == 200

    def test_validation_names_the_field(self, admin_client):
        missing_prefix = admin_client.post(REGISTER, {**REGISTRATION, "internal_ip": "10.0.3.8"}, format="json")
        assert missing_prefix.status_code == 400 and set(missing_prefix.json()["errors"]) == {"internal_ip"}
        unknown = admin_client.post(REGISTER, {**REGISTRATION, "extra": 1}, format="json")
        assert unknown.status_code == 400 and set(unknown.json()["errors"]) == {"extra"}
        assert not Node.objects.exists()


class TestHeartbeat:
    def test_applies_and_answers_online(self, agent, registered):
        response = agent.post(HEARTBEAT, heartbeat_body(cards=4), format="json")
        assert response.status_code == 200, response.content
        assert response.json()["status"] == "online"
        node = Node.objects.get(id=registered[0].id)
        assert (node.gpu_total, node.gpu_type, node.labels[TOPOLOGY_LABEL]) == (4, "nvidia", NV4_LABEL)

    def test_corrects_ledger_drift_and_revives_an_offline_node(self, agent, registered, tenant, caplog):
        node = registered[0]
        make_task(tenant=tenant, node=node, status="running", gpu_required=3)
        Node.objects.filter(id=node.id).update(gpu_used=1, status="offline")
        assert agent.post(HEARTBEAT, heartbeat_body(cards=4), format="json").status_code == 200
        node.refresh_from_db()
        assert (node.gpu_used, node.status) == (3, "online")
        assert "stored 1, recounted 3" in caplog.text

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            (lambda body: body["gpus"][3].update(memory_total_mb=-1), "gpus[3].memory_total_mb"),
            (lambda body: body["gpus"][1].update(type="voodoo"), "gpus[1].type"),
            (lambda body: body["gpus"][2].update(bogus=1), "gpus[2].bogus"),
            (lambda body: body["gpus"][0].pop("uuid"), "gpus[0].uuid"),
            (lambda body: body["gpus"][2].update(index=1), "gpus[2].index"),
            (lambda body: body["gpus"][1].update(memory_used_mb=90000), "gpus[1].memory_used_mb"),
            (lambda body: body.update(cpu_percent=140), "cpu_percent"),
            (lambda body: body.update(gpus="lots"), "gpus"),
            (lambda body: body.update(labels=["rdma"]), "labels"),
            (lambda body: body.update(surprise=True), "surprise"),
        ],
    )
    def test_malformed_is_400_naming_the_field_and_changes_nothing(self, agent, registered, change, field):
        node = registered[0]
        node_heartbeat_apply(node=node, cpu_percent=5.0, memory_used_mb=100, gpus=[card(0), card(1)],
                             labels={TOPOLOGY_LABEL: "nv=0-1;numa=0:0,1:0"})
        Node.objects.filter(id=node.id).update(labels={**Node.objects.get(id=node.id).labels, "owner": "ops"},
                                               status="offline")
        before_node = Node.objects.filter(id=node.id).values().get()
        before_cards = list(GPU.objects.filter(node=node).values())
        body = heartbeat_body(cards=4)
        change(body)
        response = agent.post(HEARTBEAT, body, format="json")
        assert response.status_code == 400
        assert field in response.json()["errors"], response.json()
        assert Node.objects.filter(id=node.id).values().get() == before_node
        assert list(GPU.objects.filter(node=node).values()) == before_cards


class TestNodeTokensAreNotUsers:
    def test_user_routes_refuse_a_node_token(self, agent, registered):
        assert agent.get("/api/v1/tasks").status_code == 401
        assert agent.get("/api/v1/nodes").status_code == 401
        assert agent.put(f"/api/v1/nodes/{registered[0].id}/topology", {"region": "x", "zone": "", "rack": ""},
                         format="json").status_code == 401

    def test_user_tokens_cannot_call_agent_routes(self, admin_client, tenant_client):
        assert admin_client.get(WORK).status_code == 401
        assert tenant_client.post(HEARTBEAT, heartbeat_body(), format="json").status_code == 401


class TestNodeApi:
    def test_list_filters(self, admin_client):
        make_node(name="a1", gpu_type="ascend", region="cn")
        make_node(name="n1", gpu_type="nvidia", region="eu", schedulable=False)
        assert [n["name"] for n in admin_client.get("/api/v1/nodes?gpu_type=ascend").json()] == ["a1"]
        assert [n["name"] for n in admin_client.get("/api/v1/nodes?schedulable=false").json()] == ["n1"]
        assert [n["name"] for n in admin_client.get("/api/v1/nodes?region=eu").json()] == ["n1"]
        bad = admin_client.get("/api/v1/nodes?gpu_type=voodoo")
        assert bad.status_code == 400 and "gpu_type" in bad.json()["errors"]

    def test_tenants_see_shared_nodes_and_their_own_dedicated_ones(self, tenant_client, tenant, other_tenant):
        make_node(name="shared")
        make_node(name="mine", dedicated_tenant=tenant)
        theirs = make_node(name="theirs", dedicated_tenant=other_tenant)
        assert sorted(n["name"] for n in tenant_client.get("/api/v1/nodes").json()) == ["mine", "shared"]
        assert tenant_client.get(f"/api/v1/nodes/{theirs.id}").status_code == 404

    def test_detail_shows_cards_tasks_and_topology(self, admin_client, tenant):
        node = make_node(cards=4, labels={TOPOLOGY_LABEL: NV4_LABEL})
        task = make_task(tenant=tenant, gpu_required=2)
        assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[0, 1])
        body = admin_client.get(f"/api/v1/nodes/{node.id}").json()
        assert body["topology"] == {"domains": [[0, 1], [2, 3]], "numa": {"0": 0, "1": 0, "2": 1, "3": 1}}
        assert [c["numa"] for c in body["cards"]] == [0, 0, 1, 1]
        assert [[t["id"] for t in c["active_tasks"]] for c in body["cards"]] == [[task.id], [task.id], [], []]
        assert body["gpu_used"] == 2 and body["usage"]["gpu"] == 0.5

    def test_tenant_detail_lists_only_its_own_tasks(self, tenant_client, tenant, other_tenant):
        node = make_node(cards=2)
        mine, theirs = make_task(tenant=tenant, gpu_required=1), make_task(tenant=other_tenant, gpu_required=1)
        assert task_transition(mine.id, "pending", "scheduled", node=node, gpus=[0])
        assert task_transition(theirs.id, "pending", "scheduled", node=node, gpus=[1])
        cards = tenant_client.get(f"/api/v1/nodes/{node.id}").json()["cards"]
        assert [[t["id"] for t in c["active_tasks"]] for c in cards] == [[mine.id], []]

    def test_topology_put(self, admin_client, admin_user):
        node = make_node()
        response = admin_client.put(f"/api/v1/nodes/{node.id}/topology",
                                    {"region": "eu", "zone": "eu-1", "rack": "r1"}, format="json")
        assert response.status_code == 200 and response.json()["rack"] == "r1"
        assert NodeAuditEntry.objects.get(node=node).actor == admin_user

    def test_topology_put_is_strict(self, admin_client):
        node = make_node()
        response = admin_client.put(f"/api/v1/nodes/{node.id}/topology",
                                    {"region": "eu", "zone": "eu-1", "rack": "r1", "row": "7"}, format="json")
        assert response.status_code == 400 and "row" in response.json()["errors"]
        assert admin_client.put(f"/api/v1/nodes/{node.id}/topology", {"region": "eu"},
                                format="json").json()["errors"].keys() == {"zone", "rack"}
        node.refresh_from_db()
        assert node.region == ""

    def test_patch(self, admin_client, tenant):
        node = make_node(labels={TOPOLOGY_LABEL: NV4_LABEL})
        response = admin_client.patch(f"/api/v1/nodes/{node.id}",
                                      {"labels": {"rdma": "true"}, "schedulable": False,
                                       "dedicated_tenant": tenant.id}, format="json")
        assert response.status_code == 200, response.content
        node.refresh_from_db()
        assert (node.schedulable, node.dedicated_tenant_id) == (False, tenant.id)
        assert node.labels == {"rdma": "true", TOPOLOGY_LABEL: NV4_LABEL}
        admin_client.patch(f"/api/v1/nodes/{node.id}", {"dedicated_tenant": None}, format="json")
        node.refresh_from_db()
        assert node.dedicated_tenant_id is None and not node.schedulable

    @pytest.mark.parametrize(
        ("body", "field", "status"),
        # A tenant that does not exist is a 404, an agent's label a rule's 403; the others the schema forbids.
        [({"dedicated_tenant": 987654}, "dedicated_tenant", 404), ({"gpu_used": 0}, "gpu_used", 400),
         ({"labels": {TOPOLOGY_LABEL: "nv=;numa=0:-"}}, "labels", 403),
         ({"schedulable": "perhaps"}, "schedulable", 400)],
    )
    def test_patch_validation(self, admin_client, body, field, status):
        node = make_node(labels={"a": "b"})
        response = admin_client.patch(f"/api/v1/nodes/{node.id}", body, format="json")
        assert response.status_code == status and field in response.json()["errors"]
        node.refresh_from_db()
        assert node.labels == {"a": "b"} and node.schedulable and not NodeAuditEntry.objects.exists()

    def test_tenants_cannot_change_nodes(self, tenant_client):
        node = make_node()
        assert tenant_client.patch(f"/api/v1/nodes/{node.id}", {"schedulable": False},
                                   format="json").status_code == 403
        assert tenant_client.put(f"/api/v1/nodes/{node.id}/topology", {"region": "x", "zone": "", "rack": ""},
                                 format="json").status_code == 403
        node.refresh_from_db()
        assert node.schedulable and node.region == ""


@pytest.mark.django_db
def test_the_node_list_is_paged_like_tasks(admin_client):
    """issue 27 item 10: the node list returned every node of the cluster in one response."""
    for index in range(5):
        make_node(name=f"n{index}")
    response = admin_client.get("/api/v1/nodes?limit=2&offset=2")
    assert [node["name"] for node in response.json()] == ["n2", "n3"]
    assert response["X-Total-Count"] == "5"
    assert 'rel="next"' in response["Link"] and 'rel="prev"' in response["Link"]
    assert admin_client.get("/api/v1/nodes?limit=501").status_code == 400

