from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self) -> None:
        from tenants import credential_changes

        credential_changes.connect()
