"""A task's published port is reached from its own tenant's bridge and from off the node, never from another
tenant's container on the same node (design §16.5): the iptables command lines the docker runtime runs."""

import subprocess

from nodes.agent.port_guard import CHAIN, FORWARD_CHAIN, PortGuard
from nodes.agent.runtime import DockerRuntime, TaskSpec


class FakeHost:
    """Answers docker and iptables as a node would; `iptables -S` lists the rules appended so far."""

    def __init__(self, *, network_id="0123456789abcdef", iptables_error: str | None = None):
        self.calls: list[list[str]] = []
        self.network_id = network_id
        self.iptables_error = iptables_error
        self.rules: list[list[str]] = []

    def __call__(self, argv, *, binary=False):
        argv = list(argv)
        self.calls.append(argv)
        if argv[0] in ("iptables", "ip6tables"):
            return self._iptables(argv)
        if argv[:3] == ["docker", "network", "inspect"]:
            return subprocess.CompletedProcess(argv, 0, f"{self.network_id} \n", "")
        return subprocess.CompletedProcess(argv, 0, b"" if binary else "", b"" if binary else "")

    def _iptables(self, argv):
        if self.iptables_error:
            return subprocess.CompletedProcess(argv, 4, "", self.iptables_error)
        if argv[1] == "-A":
            self.rules.append(argv[1:])
        elif argv[1] == "-D":
            self.rules.remove(["-A", *argv[2:]])
        elif argv[1] == "-S":
            listed = "\n".join(" ".join(rule) for rule in self.rules if rule[1] == argv[2])
            return subprocess.CompletedProcess(argv, 0, f"-N {argv[2]}\n{listed}\n", "")
        elif argv[1] == "-C":
            return subprocess.CompletedProcess(argv, 1, "", "Bad rule")
        return subprocess.CompletedProcess(argv, 0, "", "")


def _rules(host, tool="iptables", chain=CHAIN):
    return [call[1:] for call in host.calls if call[0] == tool and call[1:3] == ["-A", chain]]


def test_a_published_port_admits_its_tenants_bridge_and_drops_every_other_docker_bridge():
    host = FakeHost()
    runtime = DockerRuntime(host, publish_address="10.0.0.7")

    runtime.start(TaskSpec(id=12, image="vllm", command="serve", port=8001, tenant=3))

    assert ["iptables", "-N", CHAIN] in host.calls
    assert ["iptables", "-I", "INPUT", "1", "-j", CHAIN] in host.calls
    tagged = ["-p", "tcp", "--dport", "8001", "-m", "comment", "--comment", "heteroflow-task-12"]
    own = "br-0123456789ab"
    assert _rules(host) == [["-A", CHAIN, "-i", own, *tagged, "-j", "RETURN"],
                            ["-A", CHAIN, "-i", "br-+", *tagged, "-j", "DROP"],
                            ["-A", CHAIN, "-i", "docker0", *tagged, "-j", "DROP"]]
    # The NATed way in: forwarded from another bridge to the owner's.
    assert ["iptables", "-I", "DOCKER-USER", "1", "-j", FORWARD_CHAIN] in host.calls
    assert _rules(host, chain=FORWARD_CHAIN) == [
        ["-A", FORWARD_CHAIN, "-i", own, "-o", own, *tagged, "-j", "RETURN"],
        ["-A", FORWARD_CHAIN, "-i", "br-+", "-o", own, *tagged, "-j", "DROP"],
        ["-A", FORWARD_CHAIN, "-i", "docker0", "-o", own, *tagged, "-j", "DROP"]]
    run = next(index for index, call in enumerate(host.calls) if call[:2] == ["docker", "run"])
    assert max(index for index, call in enumerate(host.calls) if call[0] == "iptables") < run, \
        "guarded before the port exists"


def test_releasing_the_task_removes_its_rules_only():
    host = FakeHost()
    runtime = DockerRuntime(host, publish_address="10.0.0.7")
    runtime.start(TaskSpec(id=12, image="vllm", command="serve", port=8001, tenant=3))
    runtime.start(TaskSpec(id=13, image="vllm", command="serve", port=8002, tenant=4))

    # A restarted agent (another runtime) releases an adopted task by its tag.
    DockerRuntime(host).release("heteroflow-task-12")

    assert {rule[rule.index("--comment") + 1] for rule in host.rules} == {"heteroflow-task-13"}
    assert len(host.rules) == 6


def test_an_ipv6_node_address_is_guarded_with_ip6tables_and_a_task_without_a_port_is_not_guarded():
    host = FakeHost()
    runtime = DockerRuntime(host)
    runtime.start(TaskSpec(id=5, image="img", command="true", tenant=3))
    assert not _rules(host)
    runtime.start(TaskSpec(id=6, image="img", command="serve", port=8003, tenant=3, node_address="fd00::7"))
    assert _rules(host, "ip6tables") and not _rules(host, "iptables")


def test_a_task_without_a_tenant_is_let_in_from_the_default_bridge_only():
    host = FakeHost()
    DockerRuntime(host).start(TaskSpec(id=7, image="img", command="serve", port=8004, node_address="10.0.0.7"))
    assert [rule[rule.index("-i") + 1] for rule in _rules(host)] == ["docker0", "br-+", "docker0"]


def test_without_the_right_to_change_iptables_the_task_still_starts_and_the_node_says_so(caplog):
    host = FakeHost(iptables_error="iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: "
                                   "Permission denied (you must be root)")
    runtime = DockerRuntime(host, publish_address="10.0.0.7")
    for task_id in (1, 2):
        assert runtime.start(TaskSpec(id=task_id, image="img", command="serve", port=8000 + task_id, tenant=3))
    assert "not guarded" in caplog.text and "Permission denied" in caplog.text
    assert sum(call[:2] == ["iptables", "-N"] for call in host.calls) == 1, "tried once"


def test_an_unknown_bridge_lets_no_docker_bridge_in():
    guard_host = FakeHost()
    guard = PortGuard(guard_host)
    assert guard.admit_only(task_name="heteroflow-task-9", port=8009, bridge=None)
    assert [rule[rule.index("-j") + 1] for rule in _rules(guard_host)] == ["DROP", "DROP"]
    assert [rule[rule.index("-j") + 1] for rule in _rules(guard_host, chain=FORWARD_CHAIN)] == ["DROP"] * 4


def test_without_docker_user_the_input_guard_still_stands():
    """A daemon that manages no iptables has no DOCKER-USER chain, and no NAT to guard."""

    class NoDockerUser(FakeHost):
        def _iptables(self, argv):
            if "DOCKER-USER" in argv:
                return subprocess.CompletedProcess(argv, 1, "", "iptables: No chain/target/match by that name.")
            return super()._iptables(argv)

    host = NoDockerUser()
    assert PortGuard(host).admit_only(task_name="heteroflow-task-9", port=8009, bridge="br-0123456789ab")
    assert len(_rules(host)) == 3 and not _rules(host, chain=FORWARD_CHAIN)
