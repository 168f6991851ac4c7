from django.urls import path

from tenants import token_views

urlpatterns = [
    path("tokens/", token_views.tokens_page, name="tokens"),
]
