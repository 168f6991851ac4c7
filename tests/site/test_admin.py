import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client

PROJECT_APPS = ("tenants", "nodes", "scheduling", "plugins_admin")


def project_models():
    return [model for app in PROJECT_APPS for model in apps.get_app_config(app).get_models()]


def test_every_project_model_is_in_the_django_admin():
    missing = [model.__name__ for model in project_models() if not admin.site.is_registered(model)]
    assert missing == []


@pytest.mark.django_db
def test_every_admin_changelist_renders(admin_user):
    client = Client()
    client.force_login(admin_user)
    for model in project_models():
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        assert client.get(url).status_code == 200, url
