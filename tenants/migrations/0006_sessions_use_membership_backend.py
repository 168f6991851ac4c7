"""Sessions logged in through Django's ModelBackend name it; settings now list tenants' SessionUserBackend in its
place, and a session whose backend is not listed is logged out. Those sessions are moved to the new backend, so an
upgrade logs nobody out (and back, when the migration is reversed)."""

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import migrations
from django.utils import timezone

DJANGO_BACKEND = "django.contrib.auth.backends.ModelBackend"
SESSION_USER_BACKEND = "tenants.authentication.SessionUserBackend"


def rename_session_backends(apps, *, old: str, new: str) -> None:
    store = SessionStore()
    sessions = apps.get_model("sessions", "Session").objects.filter(expire_date__gt=timezone.now())
    for session in sessions.iterator():
        data = store.decode(session.session_data)
        if data.get(BACKEND_SESSION_KEY) == old:
            session.session_data = store.encode({**data, BACKEND_SESSION_KEY: new})
            session.save(update_fields=["session_data"])


def forwards(apps, schema_editor):
    rename_session_backends(apps, old=DJANGO_BACKEND, new=SESSION_USER_BACKEND)


def backwards(apps, schema_editor):
    rename_session_backends(apps, old=SESSION_USER_BACKEND, new=DJANGO_BACKEND)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions", "0001_initial"),
        ("tenants", "0005_api_token_names"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
