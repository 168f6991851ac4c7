"""`manage.py issue_token USERNAME`: an API token for a user, for operators (design §16.4); printed once."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from heteroflow_site.errors import DomainError
from tenants.services import user_token_issue


class Command(BaseCommand):
    help = "Issue an API token for USERNAME and print it (only its digest is kept: it cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="issued by manage.py issue_token",
                            help="which client or script the token is for (shown on the API tokens page)")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive")
        try:
            instance, token = user_token_issue(user=user, name=name)
        except DomainError as refused:
            raise CommandError(refused.message) from None
        self.stdout.write(token)
        expiry = instance.expiry.isoformat() if instance.expiry else "never"
        self.stderr.write(f"token {instance.token_key}… for {username}; expires {expiry} unless used")
