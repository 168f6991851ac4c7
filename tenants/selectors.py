from django.contrib.auth.models import AbstractBaseUser

from tenants.models import Tenant


def is_admin(user: AbstractBaseUser) -> bool:
    return bool(user and user.is_authenticated and user.is_staff)


def tenant_of(user: AbstractBaseUser) -> Tenant | None:
    """The tenant a non-admin user acts for; None for admins and for users without a membership."""
    if not user or not user.is_authenticated or user.is_staff:
        return None
    membership = getattr(user, "membership", None)
    return membership.tenant if membership else None
