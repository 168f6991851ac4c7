"""nodes 0008: stored GPU types lower-cased; a card stored under two spellings keeps one row."""

from importlib import import_module

import pytest
from django.apps import apps

from nodes.models import GPU, CardHealthEvent, Node
from tests.factories import make_node

pytestmark = pytest.mark.django_db

migration = import_module("nodes.migrations.0008_lower_case_gpu_types")


def test_types_are_lower_cased_and_a_card_under_two_spellings_keeps_the_lower_case_row_or_the_newest():
    node = make_node(gpu_type="nvidia", cards=2)
    other = make_node(gpu_type="ascend", cards=0)
    Node.objects.filter(id=node.id).update(gpu_type="NVIDIA")
    Node.objects.filter(id=other.id).update(gpu_type=" Ascend")
    stray = GPU.objects.create(node=node, index=0, uuid="stray", type="NVIDIA")
    GPU.objects.create(node=node, index=2, uuid="lonely", type="Nvidia")
    GPU.objects.create(node=other, index=0, uuid="older", type="Ascend")
    newest = GPU.objects.create(node=other, index=0, uuid="newer", type="ASCEND")
    CardHealthEvent.objects.create(node=node, card_type="NVIDIA", card_index=0, kind="reported", health="ok")

    migration.lower_case_gpu_types(apps, None)

    assert dict(Node.objects.values_list("id", "gpu_type")) == {node.id: "nvidia", other.id: "ascend"}
    assert sorted(GPU.objects.filter(node=node).values_list("type", "index", "uuid")) == [
        ("nvidia", 0, f"{node.name}-gpu-0"), ("nvidia", 1, f"{node.name}-gpu-1"), ("nvidia", 2, "lonely")]
    assert not GPU.objects.filter(id=stray.id).exists()
    assert list(GPU.objects.filter(node=other).values_list("id", "type")) == [(newest.id, "ascend")]
    assert list(CardHealthEvent.objects.values_list("card_type", flat=True)) == ["nvidia"]


def test_lower_case_rows_are_left_as_they_are():
    node = make_node(gpu_type="hygon", cards=2)
    before = list(GPU.objects.values_list("id", "type", "index"))
    migration.lower_case_gpu_types(apps, None)
    assert list(GPU.objects.values_list("id", "type", "index")) == before
    assert Node.objects.get(id=node.id).gpu_type == "hygon"
