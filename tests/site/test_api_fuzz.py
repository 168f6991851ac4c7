"""Schema fuzzing of the whole API (schemathesis over /api/schema/): every operation, as an admin and as a tenant,
one by one and as stateful sequences that follow the schema's links, with every check schemathesis has (`--checks
all`) on requests the schema allows and on requests it forbids: no server error, every answer as documented for its
status, every request the schema allows accepted (or refused as a conflict, a missing reference or by a rule: 409,
404, 403), every request it forbids refused (issue 31). The node agent's routes, which speak for a node rather than
a user, are fuzzed for server errors and documented answers only.

`make test` runs a few examples per operation; `make fuzz` sets HETEROFLOW_FUZZ_EXAMPLES for a longer run, with the
coverage phase (boundary values of every parameter) too.
"""

import os
from datetime import date, timedelta

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import transaction
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from knox.models import AuthToken
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from nodes.services import agent_register
from scheduling.usage.selectors import MAX_RANGE_DAYS
from tenants.services import tenant_user_create
from tests.factories import make_node, make_task

EXAMPLES = int(os.environ.get("HETEROFLOW_FUZZ_EXAMPLES", "4"))
STATEFUL_EXAMPLES = int(os.environ.get("HETEROFLOW_FUZZ_STATEFUL_EXAMPLES", "4"))
# The coverage phase sends every parameter's boundary values: many cases, for `make fuzz`.
PHASES = ["examples", "fuzzing", "stateful"] + (["coverage"] if os.environ.get("HETEROFLOW_FUZZ_COVERAGE") else [])
FUZZ_SETTINGS = hypothesis_settings(
    max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("HETEROFLOW_FUZZ_RANDOM") is None,
    suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate], database=None,
)
AGENT_ROUTES = r"^/api/v1/agent/"
AGENT_CHECKS = [not_a_server_error, response_schema_conformance]


@pytest.fixture
def wsgi_in_test_transaction():
    """Requests go through the real WSGI stack but inside the test's transaction, as Django's test client does:
    connections must not be closed at request boundaries."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def cluster(admin_user, tenant, other_tenant):
    """A small cluster with something to read: nodes (one dedicated to the other tenant), tasks of both tenants."""
    make_node(name="fuzz-a100")
    make_node(name="fuzz-ascend", gpu_type="ascend", model="Ascend910B")
    make_node(name="fuzz-dedicated", dedicated_tenant=other_tenant)
    make_task(tenant=tenant, name="mine")
    make_task(tenant=other_tenant, name="theirs")
    _, tenant_token = tenant_user_create(tenant=tenant, username="fuzz-tenant", password="orchid-lantern-42")
    _, node_token = agent_register(name="fuzz-agent", internal_ip="10.0.0.9/24", public_ip=None, cpu_cores=8,
                                   memory_gb=64)
    return {"admin": AuthToken.objects.create(user=admin_user)[1], "tenant": tenant_token, "node": node_token}


ROLES = ["admin", "tenant"]
# Cases sent per operation, printed at the end of the module (`make fuzz` shows it).
CASES_RUN: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def _report_cases():
    yield
    if CASES_RUN:
        print(f"\nfuzz: {len(CASES_RUN)} operations, {sum(CASES_RUN.values())} cases (both roles)")


def credentials_for(path: str, role: str, tokens: dict) -> dict:
    """Agent routes take the node token; everything else the role's user token. Given to schemathesis as the
    caller's own headers, so the authentication checks know them from credentials it made up."""
    agent_route = path.startswith("/api/v1/agent/") and not path.endswith("/register")
    return {"Authorization": f"Token {tokens['node' if agent_route else role]}"}


def api_schema(app):
    """The API's schema served by `app`, with every check (`--checks all`) on requests the schema allows and on
    requests it forbids."""
    loaded = schemathesis.openapi.from_wsgi("/api/schema/?format=json", app)
    loaded.config.checks.update(included_check_names=["all"])
    loaded.config.generation.update(modes=list(GenerationMode))
    loaded.config.phases.update(phases=PHASES)
    return loaded


@schemathesis.hook("map_case")
def usage_ranges_within_the_rule_no_schema_states(context, case):
    """`GET /api/v1/usage` refuses `from` after `to` and ranges over 400 days with a 400 naming `from` (design
    §17.4): a rule across two parameters, which OpenAPI cannot state. A request the schema allows is sent with its
    dates put in order and within the range, so the positive checks test what the rule allows."""
    if case.path != "/api/v1/usage" or not case.meta or not case.meta.generation.mode.is_positive:
        return case
    query = case.query or {}
    try:
        first, last = sorted(date.fromisoformat(query[name]) for name in ("from", "to"))
    except (KeyError, TypeError, ValueError):
        return case
    last = min(last, first + timedelta(days=MAX_RANGE_DAYS - 1))
    case.query = {**query, "from": first.isoformat(), "to": last.isoformat()}
    return case


@schemathesis.hook("map_case")
def group_bounds_within_the_rules_no_schema_states(context, case):
    """`POST /api/v1/task-groups` refuses an autoscale `min` above its `max` and a `min_available` above the replica
    count with a 400 naming the field (design §17.2): rules across two properties, which JSON Schema cannot state. A
    body the schema allows is sent with them in order, so the positive checks test what the rules allow."""
    body = case.body
    if case.path != "/api/v1/task-groups" or case.method != "POST" or not isinstance(body, dict) or not case.meta \
            or not case.meta.generation.mode.is_positive:
        return case
    autoscale = body.get("autoscale")
    if isinstance(autoscale, dict) and _is_number(autoscale.get("min")) and _is_number(autoscale.get("max")):
        low, high = sorted((autoscale["min"], autoscale["max"]))
        body["autoscale"] = {**autoscale, "min": low, "max": high}
    replicas = body.get("replicas") if body.get("replicas") is not None else body.get("world_size")
    if _is_number(body.get("min_available")) and _is_number(replicas):
        body["min_available"] = min(body["min_available"], replicas)
    return case


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Loading the schema touches no table; the WSGI app is the project's own.
schema = api_schema(get_wsgi_application())


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
@schema.exclude(path_regex=AGENT_ROUTES).parametrize()
@FUZZ_SETTINGS
def test_every_operation_answers_exactly_as_its_schema_says(case, role, cluster, wsgi_in_test_transaction):
    CASES_RUN[case.operation.label] = CASES_RUN.get(case.operation.label, 0) + 1
    case.call_and_validate(headers=credentials_for(case.path, role, cluster))


@pytest.mark.django_db
@schema.include(path_regex=AGENT_ROUTES).parametrize()
@FUZZ_SETTINGS
def test_agent_routes_answer_without_server_errors_and_as_documented(case, cluster, wsgi_in_test_transaction):
    CASES_RUN[case.operation.label] = CASES_RUN.get(case.operation.label, 0) + 1
    case.call_and_validate(headers=credentials_for(case.path, "admin", cluster), checks=AGENT_CHECKS)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_stateful_sequences_along_the_schema_links(role, cluster, wsgi_in_test_transaction):
    loaded = api_schema(wsgi_in_test_transaction).exclude(path_regex=AGENT_ROUTES)
    links = sum(len(response.get("links", {})) for operations in loaded.raw_schema["paths"].values()
                for operation in operations.values() for response in operation["responses"].values())
    assert links >= 10, "the schema documents the links from each create to what it created"

    class Sequences(loaded.as_state_machine()):
        def setup(self):
            # Every sequence starts from the fixture's cluster: what earlier sequences created would change which
            # links can be followed, and Hypothesis requires a sequence to draw the same way when it is run again.
            self.savepoint = transaction.savepoint()
            cache.clear()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def get_call_kwargs(self, case):
            return {"headers": credentials_for(case.path, role, cluster)}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, additional_checks=additional_checks, headers=kwargs["headers"],
                                   transport_kwargs=kwargs, recorder=self.recorder)

    Sequences.run(settings=hypothesis_settings(
        max_examples=STATEFUL_EXAMPLES, stateful_step_count=6, deadline=None, database=None,
        derandomize=os.environ.get("HETEROFLOW_FUZZ_RANDOM") is None, suppress_health_check=list(HealthCheck),
    ))
