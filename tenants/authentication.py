import binascii
from hmac import compare_digest

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework import exceptions

UserModel = get_user_model()


class UserTokenAuthentication(TokenAuthentication):
    """Knox's API tokens in one statement per request: the token with its user and the user's tenant (which every
    tenant-scoped view and the request log read). Knox also swept the user's other expired tokens on every request;
    issuing a token sweeps them instead (tenants.services.user_token_issue), and an expired token is refused and
    deleted when presented, as in knox. Nothing is cached: a revoked token is refused by the next request."""

    def authenticate_credentials(self, token: bytes):
        token = token.decode("utf-8")
        candidates = AuthToken.objects.filter(token_key=token[:CONSTANTS.TOKEN_KEY_LENGTH]).select_related(
            "user__membership__tenant")
        digest = None
        for auth_token in candidates:
            if auth_token.expiry is not None and auth_token.expiry < timezone.now():
                username = auth_token.user.get_username()
                auth_token.delete()
                token_expired.send(sender=self.__class__, username=username, source="auth_token")
                continue
            if digest is None:
                try:
                    digest = hash_token(token)
                except (TypeError, binascii.Error):
                    break
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise exceptions.AuthenticationFailed(_("Invalid token."))


class SessionUserBackend(ModelBackend):
    """Django's password and permission backend whose session user comes with its membership and tenant in the
    same statement, as a token's does (`UserTokenAuthentication`): tenant-scoped pages read them (`tenant_of`) and
    the request log names every request's tenant, one round trip to PostgreSQL more per request otherwise. A user
    without a membership (an admin) comes known to have none: nothing reads it again."""

    def get_user(self, user_id):
        try:
            user = UserModel._default_manager.select_related("membership__tenant").get(pk=user_id)
        except UserModel.DoesNotExist:
            return None
        return user if self.user_can_authenticate(user) else None


class UserTokenScheme(KnoxTokenScheme):
    target_class = UserTokenAuthentication
