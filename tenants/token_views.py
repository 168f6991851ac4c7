"""The "API tokens" page (design §16.4): every user issues tokens for their clients (each shown once, only a digest
is kept), sees them listed and revokes them. Issuing asks for the password again: a token outlives the session, so
a session left open (or stolen) must not be enough to mint one. The check goes through `authenticate`, so wrong
passwords here count toward the login lockout like the login page's."""

from django.contrib import messages
from django.contrib.auth import authenticate
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from knox.models import AuthToken

from heteroflow_site.errors import DomainError
from heteroflow_site.web import throttled_for
from tenants.apis import TokenRevokeThrottle
from tenants.models import TOKEN_NAME_MAX_LENGTH
from tenants.services import token_name_checked, user_token_issue, user_tokens_revoke

TEMPLATE = "tenants/tokens.html"
WRONG_PASSWORD = "That is not your password."


@login_required
def tokens_page(request):
    if request.method == "POST" and request.POST.get("action") == "revoke":
        return _revoke(request)
    issued, errors, status = None, {}, 200
    name = request.POST.get("name", "") if request.method == "POST" else ""
    if request.method == "POST" and request.POST.get("action") == "issue":
        issued, errors, status = _issue(request, name)
    tokens = AuthToken.objects.filter(user=request.user).select_related("token_name").order_by("-created")
    context = {"tokens": tokens, "issued": issued, "errors": errors, "name": "" if issued else name,
               "name_max_length": TOKEN_NAME_MAX_LENGTH}
    # The new token is in this answer only: never cached, never shown again.
    response = TemplateResponse(request, TEMPLATE, context, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _issue(request, name: str) -> tuple[str | None, dict, int]:
    """(the new token, {}, 200), or (None, the error by field, the status)."""
    try:
        # The name first: a refused name costs no password check, nor a count toward the lockout.
        token_name_checked(name)
    except DomainError as refused:
        return None, {"name": refused.message}, 400
    password = request.POST.get("password", "")
    if not password:
        return None, {"password": "Enter your password to issue a token."}, 400
    if authenticate(request, username=request.user.get_username(), password=password) is None:
        return None, {"password": WRONG_PASSWORD}, 400
    try:
        _, issued = user_token_issue(user=request.user, name=name)
    except DomainError as refused:
        return None, {"issue": refused.message}, refused.status
    return issued, {}, 200


def _revoke(request):
    wait = throttled_for(request, TokenRevokeThrottle)
    if wait is not None:
        messages.error(request, f"Too many revocations: try again in {int(wait) + 1} s.")
        return redirect("tokens")
    token_key = request.POST.get("token_key", "")
    if user_tokens_revoke(user=request.user, actor=request.user, token_key=token_key):
        messages.success(request, f"Token {token_key}… revoked: clients using it are refused from now on.")
    else:
        messages.error(request, f"You have no token {token_key!r}.")
    return redirect("tokens")
