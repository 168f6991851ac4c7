"""The plugin page's "Preview a change" card: Preview shows the diff as an htmx partial, Save applies it."""

import re

import pytest

from plugins_admin.models import PluginChange
from scheduling.models import PluginConfig, TaskGroup
from tests.factories import make_node, make_task
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db

PREVIEW_BINPACK = {"form": "what-if", "action-binpack": "enable"}


def _cluster(tenant):
    for name in ("node-a", "node-b"):
        make_node(cards=8, name=name)
    return [make_task(tenant=tenant, gpu_required=1, name=f"job-{index}") for index in range(6)]


def _enabled(name: str) -> bool:
    return PluginConfig.objects.get(name=name).enabled


def test_the_page_has_the_preview_form_beside_save(admin_web):
    html = admin_web.get("/plugins/").content.decode()

    card = re.search(r'<section id="what-if-card".*?</section>', html, re.DOTALL).group(0)
    assert 'value="what-if"' in card and ">Preview</button>" in card
    assert 'value="what-if-save"' in card and ">Save</button>" in card
    assert 'name="action-binpack"' in card and 'name="weight-nvlink"' in card
    assert 'name="action-gpu-filter"' not in card  # always on: nothing to switch
    assert "css/what_if.css" in html


def test_preview_shows_the_moved_tasks_and_both_bars_and_saves_nothing(admin_web, tenant):
    _cluster(tenant)

    response = admin_web.post("/plugins/", PREVIEW_BINPACK, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="what-if-card"')
    moved = re.search(r'<table class="table" id="moved-tasks">.*?</table>', html, re.DOTALL).group(0)
    assert moved.count("<tr>") == 1 + 3
    assert re.search(r'aria-label="Now: node-a 3/8, node-b 3/8"', html)
    assert re.search(r'aria-label="Proposed: (node-a 6/8, node-b 0/8|node-a 0/8, node-b 6/8)"', html)
    assert '<option value="enable" selected>' in html  # the asked change stays in the form
    assert not _enabled("binpack") and _enabled("spread")
    assert not PluginChange.objects.exists()


def test_the_preview_says_gangs_are_placed_whole_and_what_it_does_not_preview(admin_web, tenant):
    _cluster(tenant)
    gang = TaskGroup.objects.create(tenant=tenant, name="ddp", type="training", world_size=2, gpus_per_worker=2)
    for rank in range(2):
        make_task(tenant=tenant, type="training", gpu_required=2, group=gang, rank=rank, priority=90)

    html = admin_web.post("/plugins/", PREVIEW_BINPACK, **HTMX).content.decode()

    summary = re.search(r'<p class="what-if-summary">.*?</p>', html, re.DOTALL).group(0)
    assert "first 8 pending tasks" in summary and "the members of 1 training gang among them" in summary
    assert re.search(r'<p class="muted" id="not-previewed">Not previewed: preemption \(PostFilter\)', html)


def test_an_unchanged_preview_says_nothing_moves(admin_web, tenant):
    _cluster(tenant)

    html = admin_web.post("/plugins/", {"form": "what-if"}, **HTMX).content.decode()

    assert 'id="no-moves"' in html


def test_save_applies_the_previewed_change_and_refreshes_the_table(admin_web, tenant):
    response = admin_web.post("/plugins/", {**PREVIEW_BINPACK, "form": "what-if-save", "weight-nvlink": "3"}, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Saved binpack, nvlink" in html
    assert '<div id="plugin-table" class="card-body flush table-wrap" hx-swap-oob="true">' in html
    assert _enabled("binpack") and not _enabled("spread")
    assert PluginConfig.objects.get(name="nvlink").weight == 3


def test_a_refused_change_is_shown_beside_its_field_and_nothing_is_saved(admin_web, tenant):
    body = {"form": "what-if-save", "action-binpack": "enable", "weight-spread": "500"}

    html = admin_web.post("/plugins/", body, **HTMX).content.decode()

    row = re.search(r'<tr id="what-if-spread">.*?</tr>', html, re.DOTALL).group(0)
    assert "field-error" in row and "100" in row
    assert not _enabled("binpack")
    assert not PluginChange.objects.exists()


def test_a_rule_refusal_is_shown_beside_the_switch(admin_web, tenant):
    body = {"form": "what-if", "action-spread": "enable", "weight-spread": "0"}

    html = admin_web.post("/plugins/", body, **HTMX).content.decode()

    row = re.search(r'<tr id="what-if-spread">.*?</tr>', html, re.DOTALL).group(0)
    assert "weight must be at least 1" in row


def test_without_htmx_the_preview_is_the_whole_page(admin_web, tenant):
    _cluster(tenant)

    response = admin_web.post("/plugins/", PREVIEW_BINPACK)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="plugin-table"' in html and 'id="moved-tasks"' in html


def test_tenants_cannot_preview_or_save(tenant_web, tenant):
    assert tenant_web.post("/plugins/", PREVIEW_BINPACK, **HTMX).status_code == 403
    assert tenant_web.post("/plugins/", {**PREVIEW_BINPACK, "form": "what-if-save"}, **HTMX).status_code == 403
    assert not _enabled("binpack")
