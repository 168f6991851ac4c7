from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from knox.models import AuthToken

from heteroflow_site.errors import Conflict, DomainError, NotAllowed
from heteroflow_site.sentinels import KEEP, Keep
from heteroflow_site.validation import GPU_QUOTA_MAX, has_control_characters
from tenants.models import (
    MAX_PRIORITY,
    TOKEN_NAME_MAX_LENGTH,
    ApiTokenName,
    ShareGroup,
    TenancyAuditEntry,
    Tenant,
    TenantMembership,
)
from tenants.signals import tenancy_changed


def tenant_create(*, name: str, gpu_quota: int | None = None, status: str = Tenant.Status.ACTIVE, actor=None) -> Tenant:
    with transaction.atomic():
        if Tenant.objects.filter(name=name).exists():
            raise Conflict(f"a tenant named {name!r} already exists", field="name")
        tenant = Tenant.objects.create(name=name, gpu_quota=gpu_quota, status=status)
        TenancyAuditEntry.objects.create(
            actor=actor, action="tenant.create", target=name, details={"gpu_quota": gpu_quota, "status": status}
        )
    return tenant


def tenant_user_create(*, tenant: Tenant, username: str, password: str, actor=None) -> tuple[object, str]:
    """Create a tenant's user and its first API token; the token is returned once, only its digest is kept."""
    User = get_user_model()
    try:
        validate_password(password, user=User(username=username))
    except ValidationError as weak:
        raise NotAllowed(" ".join(weak.messages), field="password") from None
    with transaction.atomic():
        if User.objects.filter(username=username).exists():
            raise Conflict(f"the username {username!r} is taken", field="username")
        user = User.objects.create_user(username=username, password=password)
        TenantMembership.objects.create(user=user, tenant=tenant)
        _, token = _named_token(user, FIRST_TOKEN_NAME)
        TenancyAuditEntry.objects.create(
            actor=actor, action="membership.add", target=tenant.name, details={"username": username}
        )
    return user, token


class TooManyTokens(DomainError):
    """The user already holds `HETEROFLOW_TOKENS_PER_USER` unexpired API tokens (issue 27 item 10)."""

    status = 409
    code = "too_many_tokens"


# The name of the token a new user's account comes with (`tenant_user_create`).
FIRST_TOKEN_NAME = "issued with the account"


def _named_token(user, name: str) -> tuple[AuthToken, str]:
    instance, token = AuthToken.objects.create(user=user)
    ApiTokenName.objects.create(token=instance, name=name)
    return instance, token


def token_name_checked(name: str) -> str:
    """A token's name as kept: without surrounding blanks, not empty, at most TOKEN_NAME_MAX_LENGTH characters."""
    name = name.strip()
    if not name:
        raise DomainError("give the token a name: which client or script it is for", field="name")
    if len(name) > TOKEN_NAME_MAX_LENGTH or has_control_characters(name):
        raise DomainError(f"a name is at most {TOKEN_NAME_MAX_LENGTH} printable characters", field="name")
    return name


def user_token_issue(*, user, name: str) -> tuple[AuthToken, str]:
    """A new API token for `user` (another client of theirs, `name` says which); shown once. At most
    `HETEROFLOW_TOKENS_PER_USER` unexpired ones: a stolen session cannot mint tokens without end, and every token
    stays one to revoke."""
    name = token_name_checked(name)
    limit = settings.HETEROFLOW_TOKENS_PER_USER
    with transaction.atomic():
        # The user's row lock makes two concurrent issues count one after the other.
        get_user_model().objects.select_for_update().filter(id=user.id).first()
        # Expired tokens are swept here rather than on every authenticated request (tenants.authentication).
        AuthToken.objects.filter(user=user, expiry__lte=timezone.now()).delete()
        if AuthToken.objects.filter(user=user, expiry__gt=timezone.now()).count() >= limit:
            raise TooManyTokens(f"you hold {limit} API tokens, the most allowed; revoke one first")
        instance, token = _named_token(user, name)
        TenancyAuditEntry.objects.create(actor=user, action="token.issue", target=user.username,
                                         details={"token_key": instance.token_key, "name": name})
    return instance, token


def user_tokens_revoke(*, user, actor, token_key: str | None = None, reason: str = "") -> int:
    """Revoke one of `user`'s API tokens (by its `token_key`, the first characters) or all of them; how many.
    Only a revocation that revoked something is audited: a key the user does not hold writes nothing."""
    with transaction.atomic():
        tokens = AuthToken.objects.filter(user=user)
        if token_key is not None:
            tokens = tokens.filter(token_key=token_key)
        # What the delete counts includes the tokens' names: only the tokens are told.
        revoked = tokens.delete()[1].get(AuthToken._meta.label, 0)
        if revoked:
            details = {"token_key": token_key, "revoked": revoked, **({"reason": reason} if reason else {})}
            TenancyAuditEntry.objects.create(actor=actor, action="token.revoke", target=user.username,
                                             details=details)
    return revoked


def share_group_create(*, name: str, tenants: list[Tenant], actor=None) -> ShareGroup:
    with transaction.atomic():
        if ShareGroup.objects.filter(name=name).exists():
            raise Conflict(f"a share group named {name!r} already exists", field="name")
        group = ShareGroup.objects.create(name=name)
        group.tenants.set(tenants)
        tenancy_changed.send(sender=ShareGroup, tenant_id=None, reason=f"share group {name} created")
        TenancyAuditEntry.objects.create(
            actor=actor, action="share_group.create", target=name, details={"tenants": sorted(t.id for t in tenants)}
        )
    return group


def tenant_update(
    *, tenant_id: int, status: str | Keep = KEEP, gpu_quota: int | None | Keep = KEEP,
    max_priority: int | Keep = KEEP, actor=None
) -> Tenant:
    """Change a tenant's `status`, `gpu_quota` (None = unlimited) and/or `max_priority` (design §16.2); the audit
    row holds before and after.

    A new quota governs the next scheduling attempt; tasks already placed keep running. A lower ceiling governs
    the next submissions; tasks already submitted keep their priority.
    """
    changes = {field: value for field, value in (("status", status), ("gpu_quota", gpu_quota),
                                                 ("max_priority", max_priority)) if value is not KEEP}
    if "status" in changes and status not in Tenant.Status.values:
        raise DomainError(f"status must be one of {', '.join(Tenant.Status.values)}", field="status")
    if gpu_quota is not KEEP and gpu_quota is not None and not 0 <= gpu_quota <= GPU_QUOTA_MAX:
        raise DomainError(f"gpu_quota must be 0 to {GPU_QUOTA_MAX}, or null for unlimited", field="gpu_quota")
    if max_priority is not KEEP and not 0 <= max_priority <= MAX_PRIORITY:
        raise DomainError(f"max_priority must be 0 to {MAX_PRIORITY}", field="max_priority")
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(id=tenant_id)
        if not changes:
            return tenant
        before = {field: getattr(tenant, field) for field in changes}
        for field, value in changes.items():
            setattr(tenant, field, value)
        tenant.save(update_fields=list(changes))
        tenancy_changed.send(sender=Tenant, tenant_id=tenant.id, reason=f"tenant {tenant.name} changed")
        TenancyAuditEntry.objects.create(
            actor=actor, action="tenant.update", target=tenant.name, details={"before": before, "after": changes}
        )
    return tenant


def share_group_update(*, group_id: int, name: str, tenants: list[Tenant], actor=None) -> ShareGroup:
    """Rename a share group and replace its members. The scheduler reads groups every cycle and every bind,
    so the change governs the next attempt; tasks already sharing a card are not moved."""
    with transaction.atomic():
        group = ShareGroup.objects.select_for_update().get(id=group_id)
        if ShareGroup.objects.filter(name=name).exclude(id=group_id).exists():
            raise Conflict(f"a share group named {name!r} already exists", field="name")
        before = {"name": group.name, "tenants": sorted(group.tenants.values_list("id", flat=True))}
        group.name = name
        group.save(update_fields=["name"])
        group.tenants.set(tenants)
        after = {"name": name, "tenants": sorted(t.id for t in tenants)}
        tenancy_changed.send(sender=ShareGroup, tenant_id=None, reason=f"share group {name} changed")
        TenancyAuditEntry.objects.create(
            actor=actor, action="share_group.update", target=name, details={"before": before, "after": after}
        )
    return group


def share_group_delete(*, group_id: int, actor=None) -> None:
    with transaction.atomic():
        group = ShareGroup.objects.select_for_update().get(id=group_id)
        before = {"name": group.name, "tenants": sorted(group.tenants.values_list("id", flat=True))}
        group.delete()
        tenancy_changed.send(sender=ShareGroup, tenant_id=None, reason=f"share group {before['name']} deleted")
        TenancyAuditEntry.objects.create(
            actor=actor, action="share_group.delete", target=before["name"], details={"before": before, "after": None}
        )


def user_staff_set(*, user_id: int, is_staff: bool, actor) -> bool:
    """Grant or withdraw administrator rights; an admin cannot withdraw their own (nobody may lock the console
    out by accident). False when nothing changed."""
    if user_id == actor.id and not is_staff:
        raise NotAllowed("you cannot withdraw your own administrator rights: ask another administrator",
                         field="is_staff")
    User = get_user_model()
    with transaction.atomic():
        changed = User.objects.filter(id=user_id, is_staff=not is_staff).update(is_staff=is_staff)
        if changed:
            username = User.objects.values_list("username", flat=True).get(id=user_id)
            TenancyAuditEntry.objects.create(actor=actor, action="user.staff", target=username,
                                             details={"is_staff": is_staff})
    return bool(changed)


def user_active_set(*, user_id: int, is_active: bool, actor) -> bool:
    """Deactivate or reactivate a user. An inactive one cannot sign in nor use a session already open, and
    deactivating revokes their API tokens (`tenants.credential_changes`): reactivated, they issue new ones.
    An admin cannot deactivate themselves. False when nothing changed."""
    if user_id == actor.id and not is_active:
        raise NotAllowed("you cannot deactivate yourself: ask another administrator", field="is_active")
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().get(id=user_id)
        if user.is_active == is_active:
            return False
        user.is_active = is_active
        # Saved, not updated: the save's signal revokes the tokens of a deactivated user.
        user.save(update_fields=["is_active"])
        TenancyAuditEntry.objects.create(actor=actor, action="user.active", target=user.username,
                                         details={"is_active": is_active})
    return True


def user_password_reset_path(*, user, actor) -> str:
    """A one-time link (path) with which `user` sets a new password; it stops working once used, once the password
    changed otherwise, or after PASSWORD_RESET_TIMEOUT. Audited (the link itself is not kept)."""
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    TenancyAuditEntry.objects.create(actor=actor, action="user.password_reset_link", target=user.username,
                                     details={})
    return f"/reset/{urlsafe_base64_encode(force_bytes(user.pk))}/{default_token_generator.make_token(user)}/"
