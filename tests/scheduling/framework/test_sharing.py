from scheduling.framework.snapshot import CardInfo, TenancyView
from scheduling.framework.sharing import card_admits_tenant, may_share

A, B, C = 1, 2, 3
GROUPS = TenancyView(groups_of={A: frozenset({100}), B: frozenset({100, 200}), C: frozenset({200})})


def test_same_tenant_shares_without_groups():
    assert may_share(A, A, TenancyView())


def test_no_group_means_isolated():
    assert not may_share(A, B, TenancyView())


def test_common_group_shares():
    assert may_share(A, B, GROUPS)
    assert may_share(B, C, GROUPS)
    assert not may_share(A, C, GROUPS)


def test_every_occupant_must_admit_the_newcomer():
    card = CardInfo(index=0, occupant_tenants={A, B})
    assert not card_admits_tenant(card, C, GROUPS)  # C shares with B but not with A
    assert card_admits_tenant(card, B, GROUPS)
    assert card_admits_tenant(CardInfo(index=1), C, GROUPS)


class ExplodingGroups(dict):
    def get(self, *args):
        raise RuntimeError("tenancy lookup failed")


def test_fails_closed_on_errors_and_missing_data():
    broken = TenancyView(groups_of=ExplodingGroups())
    assert not may_share(A, B, broken)
    assert not card_admits_tenant(CardInfo(index=0, occupant_tenants={B}), A, broken)
    assert not may_share(A, None, GROUPS)
    assert not may_share(A, B, TenancyView(groups_of={A: frozenset({100})}))
