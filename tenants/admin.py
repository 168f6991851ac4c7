from django import forms
from django.contrib import admin

from nodes.gpu_type_input import normalised_gpu_type
from nodes.models import GPU_TYPES
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


class TenantGpuQuotaForm(forms.ModelForm):
    class Meta:
        model = TenantGpuQuota
        fields = "__all__"

    def clean_gpu_type(self) -> str:
        # As the quota API and page store it: one of the types, lower case.
        gpu_type = normalised_gpu_type(self.cleaned_data["gpu_type"])
        if gpu_type not in GPU_TYPES:
            raise forms.ValidationError(f"one of {', '.join(GPU_TYPES)}")
        return gpu_type


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
