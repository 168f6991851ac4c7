from django.contrib.auth.models import AbstractBaseUser

from nodes.models import Node
from scheduling.framework.snapshot import TenancyView
from tenants.models import ShareGroup, Tenant


def is_admin(user: AbstractBaseUser) -> bool:
    return bool(user and user.is_authenticated and user.is_staff)


def tenant_of(user: AbstractBaseUser) -> Tenant | None:
    """The tenant a non-admin user acts for; None for admins and for users without a membership."""
    if not user or not user.is_authenticated or user.is_staff:
        return None
    membership = getattr(user, "membership", None)
    return membership.tenant if membership else None


def tenancy_view() -> TenancyView:
    """Share groups and dedicated nodes as they are now; read afresh by every cycle and every bind re-check."""
    groups_of: dict[int, set[int]] = {}
    for tenant_id, group_id in ShareGroup.tenants.through.objects.values_list("tenant_id", "sharegroup_id"):
        groups_of.setdefault(tenant_id, set()).add(group_id)
    dedicated = Node.objects.filter(dedicated_tenant__isnull=False).values_list("dedicated_tenant_id", flat=True)
    return TenancyView(
        groups_of={tenant_id: frozenset(groups) for tenant_id, groups in groups_of.items()},
        dedicated_tenant_ids=frozenset(dedicated),
    )
