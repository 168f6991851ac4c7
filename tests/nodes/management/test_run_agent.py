"""The agent's one command line: `python -m nodes.agent` and `manage.py run_agent` take the same options."""

import argparse

import pytest
from django.core.management import CommandError, call_command

from nodes.agent import __main__ as agent_main
from nodes.agent.command_line import add_arguments, agent_from, parse_fake_cards
from nodes.management.commands.run_agent import Command as RunAgent

SERVER = ["--server", "http://127.0.0.1:1", "--token", "t"]


def test_fake_cards_spec():
    cards = parse_fake_cards("ascend:910B:4:65536")
    assert [(c.index, c.type, c.model, c.memory_total_mb) for c in cards] == [
        (i, "ascend", "910B", 65536) for i in range(4)]


def test_bad_fake_cards_spec_names_the_format():
    with pytest.raises(CommandError, match="TYPE:MODEL:COUNT:MEMORY_MB"):
        call_command("run_agent", *SERVER, "--runtime", "simulated", "--fake-cards", "ascend:910B")


def test_both_entry_points_take_labels_and_fake_cards():
    django_options = {action.dest for action in RunAgent().create_parser("manage.py", "run_agent")._actions}
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert {action.dest for action in parser._actions} <= django_options
    agent = agent_from(vars(parser.parse_args([*SERVER, "--runtime", "simulated", "--label", "rdma=true",
                                               "--fake-cards", "nvidia:A100:2:81920"])))
    try:
        assert agent.extra_labels == {"rdma": "true"}
        assert [card.model for card in agent.card_source()] == ["A100", "A100"]
    finally:
        agent.close()


def test_a_label_without_a_value_is_refused_by_the_module_entry_point(capsys):
    with pytest.raises(SystemExit):
        agent_main.main([*SERVER, "--label", "rdma"])
    assert "--label takes KEY=VALUE" in capsys.readouterr().err


def test_the_token_comes_from_a_file_or_the_environment_before_the_command_line(tmp_path):
    """issue 27 item 10: a token on the command line is visible in `ps`."""
    from nodes.agent.command_line import node_token

    token_file = tmp_path / "token"
    token_file.write_text("hfn_from-file\n")
    assert node_token({"token_file": str(token_file), "token": "hfn_argv"}, {}) == "hfn_from-file"
    assert node_token({"token_file": None, "token": "hfn_argv"}, {"HETEROFLOW_NODE_TOKEN": "hfn_env"}) == "hfn_env"
    assert node_token({"token_file": None, "token": "hfn_argv"}, {}) == "hfn_argv"
    for options, message in (({"token_file": None, "token": None}, "--token-file PATH"),
                             ({"token_file": str(tmp_path / "missing")}, "--token-file"),
                             ({"token_file": str(tmp_path / "empty")}, "is empty")):
        (tmp_path / "empty").write_text("")
        with pytest.raises(ValueError, match=message):
            node_token(options, {})


def test_run_agent_without_any_token_names_the_ways_to_give_one(monkeypatch):
    monkeypatch.delenv("HETEROFLOW_NODE_TOKEN", raising=False)
    with pytest.raises(CommandError, match="--token-file PATH, HETEROFLOW_NODE_TOKEN or --token"):
        call_command("run_agent", "--server", "http://127.0.0.1:1", "--runtime", "simulated")


def test_the_docker_runtimes_container_limits_come_from_the_command_line():
    from nodes.agent.command_line import container_limits
    from nodes.agent.runtime import ContainerLimits

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert container_limits(vars(parser.parse_args(SERVER))) == ContainerLimits("10m", 3, 100)
    chosen = vars(parser.parse_args([*SERVER, "--container-log-max-size", "50m", "--container-log-max-files", "2",
                                     "--container-disk-gb", "0"]))
    assert container_limits(chosen) == ContainerLimits("50m", 2, 0)
    for bad in (["--container-log-max-size", "lots"], ["--container-log-max-files", "0"],
                ["--container-disk-gb", "-1"]):
        with pytest.raises(ValueError, match="--container-"):
            container_limits(vars(parser.parse_args([*SERVER, *bad])))
