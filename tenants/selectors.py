from django.contrib.auth.models import AbstractBaseUser

from heteroflow_site.permissions import is_admin
from tenants.models import Tenant, TenantMembership

# The user's side of the membership (`user.membership`), whose per-instance cache says "read, and none" too.
_MEMBERSHIP = TenantMembership.user.field.remote_field


def tenant_of(user: AbstractBaseUser) -> Tenant | None:
    """The tenant a non-admin user acts for; None for admins and for users without a membership. The membership and
    its tenant are read in one statement when the user's membership was not read with it (a session's user; an API
    token's comes with both)."""
    if not user or not user.is_authenticated or is_admin(user):
        return None
    if not _MEMBERSHIP.is_cached(user):
        _MEMBERSHIP.set_cached_value(user, TenantMembership.objects.select_related("tenant").filter(user=user).first())
    membership = getattr(user, "membership", None)
    return membership.tenant if membership else None
