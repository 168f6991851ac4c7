from django.urls import path

from tenants import apis

urlpatterns = [
    path("tenants", apis.TenantListCreateApi.as_view(), name="api-tenants"),
    path("tenants/<int:tenant_id>", apis.TenantDetailApi.as_view(), name="api-tenant"),
    path("tenants/<int:tenant_id>/users", apis.TenantUserCreateApi.as_view(), name="api-tenant-users"),
    path("share-groups", apis.ShareGroupListCreateApi.as_view(), name="api-share-groups"),
    path("share-groups/<int:group_id>", apis.ShareGroupDetailApi.as_view(), name="api-share-group"),
]
