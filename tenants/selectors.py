from django.contrib.auth.models import AbstractBaseUser

from heteroflow_site.permissions import is_admin
from tenants.models import Tenant


def tenant_of(user: AbstractBaseUser) -> Tenant | None:
    """The tenant a non-admin user acts for; None for admins and for users without a membership."""
    if not user or not user.is_authenticated or is_admin(user):
        return None
    membership = getattr(user, "membership", None)
    return membership.tenant if membership else None
