from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q

MAX_PRIORITY = 100
TOKEN_NAME_MAX_LENGTH = 64


class Tenant(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        INACTIVE = "inactive"

    name = models.CharField(max_length=100, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Most whole GPUs the tenant's active tasks may hold at once; null means unlimited.
    gpu_quota = models.PositiveIntegerField(null=True, blank=True)
    # The highest priority the tenant's tasks may ask for (design §16.2); a submission above it is a 400.
    max_priority = models.PositiveSmallIntegerField(default=MAX_PRIORITY, validators=[MaxValueValidator(MAX_PRIORITY)])
    # The cohort whose tenants lend each other unused nominal quota (design §16.2): at most one per tenant.
    cohort = models.ForeignKey("Cohort", null=True, blank=True, on_delete=models.SET_NULL, related_name="tenants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(max_priority__lte=MAX_PRIORITY), name="tenant_max_priority_0_100"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class ShareGroup(models.Model):
    """Tenants in one group may share a physical GPU (docs/scheduling.md, Filter); everything else is isolated."""

    name = models.CharField(max_length=100, unique=True)
    tenants = models.ManyToManyField(Tenant, related_name="share_groups", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Cohort(models.Model):
    """Tenants that lend each other the unused part of their nominal quotas, type by type (design §16.2)."""

    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TenantGpuQuota(models.Model):
    """A tenant's guarantee for one GPU type, in cards (design §16.2): `nominal` is guaranteed; beyond it the tenant
    may borrow its cohort's unused nominal up to `borrowing_limit` (null: unlimited); of its own unused nominal it
    lends at most `lending_limit` (null: all of it)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="gpu_quotas")
    gpu_type = models.CharField(max_length=32)
    nominal = models.DecimalField(max_digits=9, decimal_places=2)
    borrowing_limit = models.DecimalField(max_digits=9, decimal_places=2, null=True, blank=True)
    lending_limit = models.DecimalField(max_digits=9, decimal_places=2, null=True, blank=True)

    class Meta:
        ordering = ["tenant_id", "gpu_type"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "gpu_type"], name="tenant_gpu_quota_one_per_type"),
            models.CheckConstraint(condition=Q(nominal__gte=0), name="tenant_gpu_quota_nominal_non_negative"),
            models.CheckConstraint(condition=Q(borrowing_limit__gte=0) | Q(borrowing_limit__isnull=True),
                                   name="tenant_gpu_quota_borrowing_non_negative"),
            models.CheckConstraint(condition=Q(lending_limit__gte=0) | Q(lending_limit__isnull=True),
                                   name="tenant_gpu_quota_lending_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.gpu_type} {self.nominal}"


class TenantMembership(models.Model):
    """A non-staff user belongs to exactly one tenant; staff users are admins and belong to none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"


class ApiTokenName(models.Model):
    """The name a user gave one of their API tokens (knox's table has none): which client holds it, so that the
    right one is revoked. Tokens issued before names have no row."""

    token = models.OneToOneField("knox.AuthToken", on_delete=models.CASCADE, primary_key=True,
                                 related_name="token_name")
    name = models.CharField(max_length=TOKEN_NAME_MAX_LENGTH)

    def __str__(self) -> str:
        return self.name


class TenancyAuditEntry(models.Model):
    """Who changed tenancy (users, share groups, quotas), when, and what."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=200)
    details = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "tenancy audit entries"
