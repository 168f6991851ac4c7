from scheduling.groups.network import GLOO, NCCL, NodeAddress, communication_plan, network_domain


def node(node_id, internal_ip, public_ip=None, **labels):
    return NodeAddress(node_id=node_id, labels=labels, internal_ip=internal_ip, public_ip=public_ip)


def test_same_subnet_gives_internal_master_and_nccl():
    plan = communication_plan([node(1, "10.0.3.7/24", "203.0.113.1"), node(2, "10.0.3.9/24", "203.0.113.2")])

    assert (plan.master_addr, plan.backend) == ("10.0.3.7", NCCL)


def test_different_subnets_give_public_master_and_gloo():
    plan = communication_plan([node(1, "10.0.3.7/24", "203.0.113.1"), node(2, "10.0.4.9/24", "203.0.113.2")])

    assert (plan.master_addr, plan.backend) == ("203.0.113.1", GLOO)


def test_labels_beat_ip_addresses_both_ways():
    same_zone_other_subnets = [
        node(1, "10.0.3.7/24", "203.0.113.1", **{"heteroflow.network_zone": "dc1"}),
        node(2, "172.16.0.9/16", "203.0.113.2", **{"heteroflow.network_zone": "dc1"}),
    ]
    assert communication_plan(same_zone_other_subnets).backend == NCCL

    same_subnet_other_vpcs = [
        node(1, "10.0.3.7/24", "203.0.113.1", **{"heteroflow.vpc_id": "vpc-a"}),
        node(2, "10.0.3.9/24", "203.0.113.2", **{"heteroflow.vpc_id": "vpc-b"}),
    ]
    assert communication_plan(same_subnet_other_vpcs).backend == GLOO


def test_duplicate_internal_ips_mean_different_vpcs_and_are_split():
    twins = [node(1, "192.168.1.10/24", "203.0.113.1"), node(2, "192.168.1.10/24", "203.0.113.2")]

    plan = communication_plan(twins)

    assert (plan.master_addr, plan.backend) == ("203.0.113.1", GLOO)


def test_one_node_hosting_several_members_is_not_a_duplicate():
    same_node = [node(1, "10.0.3.7/24"), node(1, "10.0.3.7/24"), node(2, "10.0.3.8/24")]

    assert communication_plan(same_node).backend == NCCL


def test_no_prefix_or_no_address_is_never_guessed_into_a_domain():
    assert network_domain(node(1, "10.0.3.7")) is None
    assert network_domain(node(1, "")) is None
    assert communication_plan([node(1, "10.0.3.7", "203.0.113.1"), node(2, "10.0.3.8")]).backend == GLOO
