from django.urls import path

from tenants import apis, token_apis

urlpatterns = [
    path("tenants", apis.TenantListCreateApi.as_view(), name="api-tenants"),
    path("tenants/<int:tenant_id>", apis.TenantDetailApi.as_view(), name="api-tenant"),
    path("tenants/<int:tenant_id>/users", apis.TenantUserCreateApi.as_view(), name="api-tenant-users"),
    path("share-groups", apis.ShareGroupListCreateApi.as_view(), name="api-share-groups"),
    path("share-groups/<int:group_id>", apis.ShareGroupDetailApi.as_view(), name="api-share-group"),
    path("auth/token", token_apis.AuthTokenApi.as_view(), name="api-auth-token"),
    path("tokens", apis.TokenListCreateApi.as_view(), name="api-tokens"),
    path("tokens/<str:token_key>", apis.TokenDetailApi.as_view(), name="api-token"),
    path("users/<int:user_id>/tokens/revoke", apis.UserTokensRevokeApi.as_view(), name="api-user-tokens-revoke"),
]
