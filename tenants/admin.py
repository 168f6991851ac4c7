from django import forms
from django.contrib import admin

from heteroflow_site.validation import normalised_gpu_type
from tenants.models import (
    ApiTokenName,
    Cohort,
    ShareGroup,
    TenancyAuditEntry,
    Tenant,
    TenantGpuQuota,
    TenantMembership,
)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "gpu_quota", "max_priority", "cohort", "created_at"]
    list_filter = ["status", "cohort"]
    search_fields = ["name"]


@admin.register(Cohort)
class CohortAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


class TenantGpuQuotaForm(forms.ModelForm):
    class Meta:
        model = TenantGpuQuota
        fields = "__all__"

    def clean_gpu_type(self) -> str:
        # Stored lower case, as the quota API and page store it: the scheduler matches it to cards as it is.
        return normalised_gpu_type(self.cleaned_data["gpu_type"])


@admin.register(TenantGpuQuota)
class TenantGpuQuotaAdmin(admin.ModelAdmin):
    form = TenantGpuQuotaForm
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


@admin.register(ApiTokenName)
class ApiTokenNameAdmin(admin.ModelAdmin):
    """Named when issued (the API tokens page, the API): read here, renamed nowhere."""

    list_display = ["name", "token"]
    search_fields = ["name", "token__user__username"]
    readonly_fields = ["token", "name"]

    def has_add_permission(self, request) -> bool:
        return False
