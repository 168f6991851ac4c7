"""The API accepts exactly what its schema describes (issue 31): no type coercion, unknown fields refused, text taken as
sent, query parameters within the schema's bounds, and the schema saying all of it."""

import json

import pytest
from django.core.management import call_command

from nodes.models import Node
from plugins_admin.models import NotificationChannel
from scheduling.models import Task
from tenants.models import ShareGroup, Tenant
from tests.factories import make_node

TASK = {"name": "resnet", "type": "batch", "gpu_type": "nvidia", "gpu_required": 1}


def _refused(response, field: str, code: str = "incorrect_type") -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field, body
    assert body["code"] == code, body


@pytest.mark.django_db
@pytest.mark.parametrize("field,value", [
    ("gpu_required", "1"),       # text is not an integer
    ("gpu_required", True),      # nor is a boolean
    ("gpu_required", 1.5),       # nor a number with a fraction
    ("cpu_cores", "2"),          # nor a number
    ("cpu_cores", False),
    ("preemptible", 0),          # 0 is not a boolean
    ("preemptible", "true"),
    ("name", 7),                 # 7 is not a string
    ("type", 1),
    ("labels", ["a"]),           # a list is not an object
    ("image", None),
])
def test_a_value_of_another_json_type_is_refused_naming_the_field(admin_client, tenant, field, value):
    response = admin_client.post("/api/v1/tasks", {**TASK, "tenant": tenant.id, field: value}, format="json")

    _refused(response, field, code="incorrect_type" if value is not None else "null")
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_the_items_of_a_list_are_of_their_type_too(admin_client, tenant):
    response = admin_client.post("/api/v1/share-groups", {"name": "pool", "tenants": [str(tenant.id)]},
                                 format="json")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "tenants[0]"
    assert not ShareGroup.objects.exists()


@pytest.mark.django_db
def test_an_object_where_a_list_belongs_is_refused(admin_client):
    response = admin_client.post("/api/v1/share-groups", {"name": "pool", "tenants": {}}, format="json")

    _refused(response, "tenants")
    assert not ShareGroup.objects.exists()


@pytest.mark.django_db
def test_a_number_without_a_fraction_is_an_integer(admin_client, tenant):
    """JSON Schema reads 2.0 as the integer 2: so does the API (and no number beyond ±2^53, as free-form JSON's schema
    says: PostgreSQL would give 1e300 back as an integer of 301 digits)."""
    response = admin_client.post("/api/v1/tasks", {**TASK, "tenant": float(tenant.id), "gpu_required": 2.0},
                                 format="json")
    too_large = admin_client.post("/api/v1/tasks", b'{"name": "x", "gpu_required": 1e400}',
                                  content_type="application/json")

    assert response.status_code == 201, response.content
    assert Task.objects.get().gpu_required == 2
    assert too_large.status_code == 400 and too_large.json()["field"] == "gpu_required"
    assert str(2**53) in too_large.json()["errors"]["gpu_required"][0]


@pytest.mark.django_db
def test_a_body_naming_what_does_not_exist_is_a_404_naming_the_field(admin_client):
    response = admin_client.post("/api/v1/share-groups", {"name": "pool", "tenants": [987654]}, format="json")

    assert (response.status_code, response.json()["code"], response.json()["field"]) == (404, "not_found", "tenants")
    assert not ShareGroup.objects.exists()


@pytest.mark.django_db
def test_a_well_formed_request_clashing_with_what_exists_is_a_409(admin_client, tenant):
    response = admin_client.post("/api/v1/tenants", {"name": tenant.name}, format="json")

    assert (response.status_code, response.json()["code"], response.json()["field"]) == (409, "conflict", "name")
    assert response.json()["errors"] == {"name": [response.json()["message"]]}


@pytest.mark.django_db
def test_wrong_credentials_are_a_401(client):
    response = client.post("/api/v1/auth/token", {"username": "nobody", "password": "not-it"},
                           content_type="application/json")

    assert (response.status_code, response.json()["code"]) == (401, "invalid_credentials")


@pytest.mark.django_db
def test_patching_a_node_with_a_number_for_a_boolean_changes_nothing(admin_client):
    node = make_node(name="gpu-1")

    response = admin_client.patch(f"/api/v1/nodes/{node.id}", {"schedulable": 0}, format="json")

    _refused(response, "schedulable")
    assert Node.objects.get(id=node.id).schedulable is True


@pytest.mark.django_db
def test_topology_takes_text_only(admin_client):
    node = make_node(name="gpu-1", rack="r1")

    response = admin_client.put(f"/api/v1/nodes/{node.id}/topology", {"region": "", "zone": "", "rack": 0},
                                format="json")

    _refused(response, "rack")
    assert Node.objects.get(id=node.id).rack == "r1"


@pytest.mark.django_db
def test_a_channel_is_enabled_by_a_boolean_only(admin_client):
    response = admin_client.put("/api/v1/notification-channels/webhook",
                                {"enabled": 0, "target": "https://hooks.example.com/x"}, format="json")

    _refused(response, "enabled")
    assert not NotificationChannel.objects.filter(target__startswith="https://").exists()


@pytest.mark.django_db
def test_text_is_taken_as_sent_so_blank_text_is_not_a_name(admin_client):
    """DRF would trim `" "` to a blank (refused although the schema's minLength allows it) and `" n1"` to a name
    the register pattern refuses; untrimmed, what the schema says is what the API does."""
    spaced = admin_client.post("/api/v1/tenants", {"name": " acme "}, format="json")
    agent = admin_client.post("/api/v1/agent/register", {"name": " n1", "internal_ip": "10.0.0.1/24",
                                                        "cpu_cores": 1, "memory_gb": 1}, format="json")

    assert spaced.status_code == 201, spaced.content
    assert Tenant.objects.get().name == " acme "
    _refused(agent, "name", code="invalid")
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_the_task_form_still_reads_its_text_fields(client, admin_user, tenant):
    client.force_login(admin_user)

    response = client.post("/tasks/new/", {"tenant": str(tenant.id), "name": "from-form", "gpu_type": "nvidia",
                                          "gpu_required": "1", "cpu_cores": "2.5", "priority": "60"})

    assert response.status_code == 302, response.content.decode()[:2000]
    task = Task.objects.get(name="from-form")
    assert (task.gpu_required, task.cpu_cores, task.priority) == (1, 2.5, 60)


@pytest.mark.django_db
@pytest.mark.parametrize("query,parameter", [
    ("/api/v1/tasks?tenant=2147483648", "tenant"),
    ("/api/v1/tasks?tenant=0", "tenant"),
    ("/api/v1/tasks?tenant=one", "tenant"),
    ("/api/v1/tasks?status=lost-in-space", "status"),
    ("/api/v1/tasks?limit=501", "limit"),
    ("/api/v1/plugins/history?limit=0", "limit"),
])
def test_a_query_parameter_outside_the_schema_is_a_400_naming_it(admin_client, tenant, query, parameter):
    response = admin_client.get(query)

    assert response.status_code == 400, response.content
    assert response.json()["field"] == parameter
    assert parameter in response.json()["errors"]


@pytest.mark.django_db
def test_a_missing_required_query_parameter_is_named(admin_client):
    response = admin_client.post("/api/v1/plugins/binpack")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "action"


@pytest.mark.django_db
def test_query_parameters_within_the_schema_pass(admin_client, tenant):
    response = admin_client.get(f"/api/v1/tasks?tenant={tenant.id}&status=pending&limit=500&offset=2147483647")

    assert response.status_code == 200, response.content


@pytest.fixture
def published_schema(db, tmp_path):
    target = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(target))
    return json.loads(target.read_text())


def _request_schemas(schema: dict):
    """Every schema a request body uses, components followed, with its path in the document."""
    components = schema["components"]["schemas"]
    seen: set[str] = set()

    def walk(node, where):
        if isinstance(node, dict):
            reference = node.get("$ref")
            if reference:
                name = reference.rsplit("/", 1)[-1]
                if name not in seen:
                    seen.add(name)
                    yield from walk(components[name], name)
                return
            yield where, node
            for key, value in node.items():
                yield from walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for position, value in enumerate(node):
                yield from walk(value, f"{where}[{position}]")

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                yield from walk(media["schema"], f"{method.upper()} {path}")


def test_request_bodies_declare_closed_objects_storable_and_non_blank_text(published_schema):
    objects = strings = 0
    for where, node in _request_schemas(published_schema):
        if node.get("type") == "object" and "properties" in node:
            objects += 1
            assert node.get("additionalProperties") is False, where
        if node.get("type") == "string" and not {"enum", "const"} & node.keys() and node.get("maxLength") != 0:
            strings += 1
            assert "pattern" in node, f"{where}: text without the pattern that rules out NUL"
    assert objects > 10 and strings > 20
    tenant_name = published_schema["components"]["schemas"]["TenantListCreateApiInput"]["properties"]["name"]
    assert tenant_name["minLength"] == 1


def test_every_integer_query_parameter_is_bounded(published_schema):
    """int32 unless the view declares its own bounds (a log's byte offset is a bigint)."""
    bounds = {}
    for path, operations in published_schema["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["schema"].get("type") == "integer":
                    bounds[(path, parameter["name"])] = (parameter["schema"]["minimum"],
                                                         parameter["schema"]["maximum"])
    assert bounds[("/api/v1/tasks", "tenant")] == (1, 2**31 - 1)
    assert all(-(2**63) <= low <= high < 2**63 for low, high in bounds.values()), bounds


def test_request_bodies_say_the_rules_across_fields(published_schema):
    """Label keys (`propertyNames`), bodies that must hold something, free-form JSON without NUL, numbers as the API
    takes them."""
    schemas = published_schema["components"]["schemas"]
    assert published_schema["openapi"].startswith("3.1")
    labels = schemas["NodeDetailApiPatchedPatchInput"]["properties"]["labels"]
    assert labels["propertyNames"]["maxLength"] == 63 and labels["propertyNames"]["minLength"] == 1
    assert published_schema["paths"]["/api/v1/plugins/topology"]["put"]["requestBody"]["required"] is True
    assert schemas["PluginSettingsInput.topology"]["minProperties"] == 1
    assert schemas["QuotaLineInput"]["properties"]["nominal"]["type"] == "number"
    assert schemas["NodeDetailApiPatchedPatchInput"]["properties"]["dedicated_tenant"]["maximum"] == 2**31 - 1


@pytest.mark.django_db
@pytest.mark.parametrize("toleration,status", [
    ({"operator": "Exists", "value": "x"}, 403),
    ({"operator": "Equal", "value": "x"}, 403),
    ({"value": "x"}, 403),
    ({"operator": "Sometimes"}, 400),
    ({"operator": "Exists"}, 201),
    ({"key": "gpu", "value": "x"}, 201),
])
def test_a_tolerations_rules_across_fields_are_a_403_naming_the_field(admin_client, tenant, toleration, status):
    """Its shape is the schema's (a 400 beyond it); which fields go with which operator is a rule of the API's."""
    response = admin_client.post("/api/v1/tasks", {**TASK, "tenant": tenant.id, "tolerations": [toleration]},
                                 format="json")

    assert response.status_code == status, response.content
    if status == 403:
        assert response.json()["field"].startswith("tolerations[0].")


@pytest.mark.django_db
@pytest.mark.parametrize("labels", [{"": "x"}, {"k" * 64: "x"}, {"a\tb": "x"}, {"k": "nan"}, {"k": " -Infinity"}])
def test_labels_outside_their_schema_are_a_400(admin_client, tenant, labels):
    response = admin_client.post("/api/v1/tasks", {**TASK, "tenant": tenant.id, "labels": labels}, format="json")

    assert response.status_code == 400, response.content
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_free_form_json_keeps_its_numbers_exact(admin_client):
    """1e300 in a plugin's settings would come back from jsonb as an integer no renderer writes: refused, a 400."""
    refused = admin_client.put("/api/v1/plugins/nvlink", b'{"extra": {"a": 1e300}}', content_type="application/json")

    assert refused.status_code == 400
    assert admin_client.get("/api/v1/plugins").status_code == 200


def test_a_view_s_query_parameters_are_declared_once_by_one_thread_when_requests_arrive_together(monkeypatch):
    # drf-spectacular loads its extensions lazily and not thread-safely: two first requests of a web process
    # declaring at once made one of them a 500.
    import threading

    from heteroflow_site import query_parameters
    from scheduling.api.task_apis import TaskListCreateApi

    monkeypatch.setattr(query_parameters, "_declared", {})
    declaring, release, calls = threading.Event(), threading.Event(), []
    original = query_parameters._declare

    def slow_declare(view_class, method):
        calls.append(method)
        declaring.set()
        assert release.wait(timeout=10)
        return original(view_class, method)

    monkeypatch.setattr(query_parameters, "_declare", slow_declare)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(
        query_parameters.declared_query_parameters(TaskListCreateApi, "GET"))) for _ in range(2)]
    threads[0].start()
    assert declaring.wait(timeout=10)
    threads[1].start()
    threads[1].join(timeout=0.5)  # long enough to reach the declaration too, were nothing keeping it out
    release.set()
    for thread in threads:
        thread.join(timeout=30)

    assert calls == ["GET"]
    assert len(answers) == 2 and answers[0] is answers[1]
    assert {"status", "diagnostics", "limit"} <= {parameter["name"] for parameter in answers[0]}
