from django.urls import path

from tenants import tenant_views, token_views

urlpatterns = [
    path("tokens/", token_views.tokens_page, name="tokens"),
    path("tenants/", tenant_views.tenants_page, name="tenants"),
]
