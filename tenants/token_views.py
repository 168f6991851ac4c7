"""The "API tokens" page (design §16.4): every user issues tokens for their clients (each shown once, only a digest
is kept), sees them listed and revokes them."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from knox.models import AuthToken

from tenants.services import user_token_issue, user_tokens_revoke

TEMPLATE = "tenants/tokens.html"


@login_required
def tokens_page(request):
    issued = None
    if request.method == "POST":
        if request.POST.get("action") == "issue":
            _, issued = user_token_issue(user=request.user)
        elif request.POST.get("action") == "revoke":
            token_key = request.POST.get("token_key", "")
            if user_tokens_revoke(user=request.user, actor=request.user, token_key=token_key):
                messages.success(request, f"Token {token_key}… revoked: clients using it are refused from now on.")
            else:
                messages.error(request, f"You have no token {token_key!r}.")
            return redirect("tokens")
    tokens = AuthToken.objects.filter(user=request.user).order_by("-created")
    # The new token is in this answer only: never cached, never shown again.
    response = TemplateResponse(request, TEMPLATE, {"tokens": tokens, "issued": issued})
    response["Cache-Control"] = "no-store"
    return response
