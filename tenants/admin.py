from django.contrib import admin

from tenants.models import Cohort, ShareGroup, TenancyAuditEntry, Tenant, TenantGpuQuota, TenantMembership


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "gpu_quota", "max_priority", "cohort", "created_at"]
    list_filter = ["status", "cohort"]
    search_fields = ["name"]


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(TenantGpuQuota)
class TenantGpuQuotaAdmin(admin.ModelAdmin):
    list_display = ["tenant", "gpu_type", "nominal", "borrowing_limit", "lending_limit"]
    list_filter = ["gpu_type"]


@admin.register(ShareGroup)
class ShareGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    filter_horizontal = ["tenants"]
    search_fields = ["name"]


@admin.register(TenantMembership)
class TenantMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["user__username"]


@admin.register(TenancyAuditEntry)
class TenancyAuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "action", "target"]
    list_filter = ["action"]
    readonly_fields = ["at", "actor", "action", "target", "details"]
