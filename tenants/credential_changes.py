"""A user's API tokens end with the credentials they were issued under: a new password (or none usable) or a
deactivated account revokes every token the user holds, whichever way the change is saved — the admin, a password
change or reset page, `manage.py changepassword`, a service.

Django keeps the raw password on the instance from `set_password` until the save (`_password`); re-hashing the same
password at login (a changed hasher or iteration count) saves without it, and revokes nothing.
"""

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_save

from tenants.services import user_tokens_revoke

PASSWORD_CHANGED = "password changed"
DEACTIVATED = "user deactivated"


def _note_credential_change(sender, instance, raw: bool = False, **kwargs) -> None:
    instance._tokens_revoked_because = ""
    if raw or instance.pk is None:
        return
    stored = sender._default_manager.filter(pk=instance.pk).values_list("password", "is_active").first()
    if stored is None:
        return
    password, active = stored
    new_password = instance.password != password and (
        getattr(instance, "_password", None) is not None or not instance.has_usable_password())
    if new_password:
        instance._tokens_revoked_because = PASSWORD_CHANGED
    elif active and not instance.is_active:
        instance._tokens_revoked_because = DEACTIVATED


def _revoke_tokens(sender, instance, raw: bool = False, **kwargs) -> None:
    reason = getattr(instance, "_tokens_revoked_because", "")
    if reason and not raw:
        instance._tokens_revoked_because = ""
        user_tokens_revoke(user=instance, actor=None, reason=reason)


def connect() -> None:
    user_model = get_user_model()
    pre_save.connect(_note_credential_change, sender=user_model, dispatch_uid="tenants.credential_change")
    post_save.connect(_revoke_tokens, sender=user_model, dispatch_uid="tenants.credential_change")
