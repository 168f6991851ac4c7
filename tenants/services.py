from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.authtoken.models import Token

from heteroflow_site.errors import DomainError
from tenants.models import ShareGroup, TenancyAuditEntry, Tenant, TenantMembership


def tenant_create(*, name: str, gpu_quota: int | None = None, status: str = Tenant.Status.ACTIVE, actor=None) -> Tenant:
    with transaction.atomic():
        if Tenant.objects.filter(name=name).exists():
            raise DomainError(f"a tenant named {name!r} already exists", field="name")
        tenant = Tenant.objects.create(name=name, gpu_quota=gpu_quota, status=status)
        TenancyAuditEntry.objects.create(
            actor=actor, action="tenant.create", target=name, details={"gpu_quota": gpu_quota, "status": status}
        )
    return tenant


def tenant_user_create(*, tenant: Tenant, username: str, password: str, actor=None) -> tuple[object, Token]:
    User = get_user_model()
    with transaction.atomic():
        if User.objects.filter(username=username).exists():
            raise DomainError(f"the username {username!r} is taken", field="username")
        user = User.objects.create_user(username=username, password=password)
        TenantMembership.objects.create(user=user, tenant=tenant)
        token = Token.objects.create(user=user)
        TenancyAuditEntry.objects.create(
            actor=actor, action="membership.add", target=tenant.name, details={"username": username}
        )
    return user, token


def share_group_create(*, name: str, tenants: list[Tenant], actor=None) -> ShareGroup:
    with transaction.atomic():
        if ShareGroup.objects.filter(name=name).exists():
            raise DomainError(f"a share group named {name!r} already exists", field="name")
        group = ShareGroup.objects.create(name=name)
        group.tenants.set(tenants)
        TenancyAuditEntry.objects.create(
            actor=actor, action="share_group.create", target=name, details={"tenants": sorted(t.id for t in tenants)}
        )
    return group
