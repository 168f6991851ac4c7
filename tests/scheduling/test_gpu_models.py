import csv

import pytest

from scheduling.framework.gpu_models import model_matches, parse_patterns, patterns_error

# Every model string the real vendor captures report (tests/agent/fixtures, issue 18's captures) and the openb node
# list's `model` column.
REAL_MODELS = [
    "NVIDIA A100-SXM4-80GB", "NVIDIA H200-141C", "NVIDIA H100 80GB HBM3", "Ascend910", "910B4", "MLU370-X8",
    "MTT S4000", "MTT S5000", "MetaX C500", "Iluvatar BI-V150", "Iluvatar MR-V100", "Iluvatar MR-V50", "K100_AI",
    "Z100L", "R200 8F", "R200", "T20", "Enflame S60", "BR104", "Biren106B",
    "A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32",
]


@pytest.mark.parametrize("expression, model, expected", [
    ("A100", "NVIDIA A100-SXM4-80GB", True),
    ("a100", "NVIDIA A100-SXM4-80GB", True),
    ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
    ("80GB-A100", "NVIDIA A100-SXM4-80GB", False),   # tokens must occur in order
    ("A10", "NVIDIA A100-SXM4-80GB", False),
    ("A10", "A10", True),
    ("A100|H100", "NVIDIA H100 80GB HBM3", True),
    ("H100", "NVIDIA H100 80GB HBM3", True),
    ("V100M16", "V100M16", True),
    ("V100M16|V100M32", "V100M32", True),
    ("V100M16|V100M32", "V100M3", False),
    ("V100", "V100M16", False),
    ("T4", "T4", True),
    ("T4", "T20", False),
    ("S60", "Enflame S60", True),
    ("MLU370", "MLU370-X8", True),
    ("R200", "R200 8F", True),
    ("K100 AI", "K100_AI", True),
    ("MR-V100", "Iluvatar MR-V100", True),
    ("MR-V50", "Iluvatar MR-V100", False),
    ("C500", "MetaX C500", True),
    ("910B", "910B4", False),
])
def test_model_matches_by_whole_string_or_ordered_tokens(expression, model, expected):
    assert model_matches(expression, model) is expected


@pytest.mark.parametrize("model", REAL_MODELS)
def test_every_real_model_matches_itself_and_its_last_token(model):
    assert model_matches(model, model)
    assert model_matches(model.lower(), model)
    assert model_matches(model.replace(" ", "-").split("-")[-1], model)


def test_openb_node_models_select_only_their_own_cards():
    models = ["A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"]
    for wanted in models:
        assert [model for model in models if model_matches(wanted, model)] == [wanted]
    assert [model for model in models if model_matches("V100M16|V100M32", model)] == ["V100M16", "V100M32"]


def test_openb_gpu_specs_match_openb_node_models():
    from pathlib import Path
    trace = Path(__file__).resolve().parents[2] / "data" / "traces" / "openb"
    with open(trace / "openb_node_list_gpu_node.csv") as nodes:
        node_models = {row["model"] for row in csv.DictReader(nodes)}
    with open(trace / "openb_pod_list_gpuspec33.csv") as pods:
        specs = {row["gpu_spec"] for row in csv.DictReader(pods) if row["gpu_spec"]}
    assert specs
    for spec in specs:
        assert any(model_matches(spec, model) for model in node_models), spec


def test_blank_patterns_are_dropped_and_an_empty_expression_is_an_error():
    assert [pattern for pattern, _ in parse_patterns(" A100 || h100 |")] == ["a100", "h100"]
    assert patterns_error("A100|H100") is None
    assert "names no card model" in patterns_error(" | ")
    assert not model_matches("|", "A100")
