"""Metering's records in the admin (portal.admin): pools and scrape targets written as the
API writes them; deployments, with their effective-dated versions, read only."""

from django.contrib import admin

from metering.api.factory import PoolSerializer
from metering.api.telemetry import ScrapeTargetSerializer
from metering.models import Deployment, DeploymentVersion, Pool, ScrapeTarget
from metering.services.factory import pool_check, pool_write
from portal.admin import AuditedAdmin, ReadOnlyAdmin, ReadOnlyInline, site


@admin.register(Pool, site=site)
class PoolAdmin(AuditedAdmin):
    serializer = PoolSerializer
    audit_type = "pool"
    list_display = ("slug", "name", "gpu_type", "gpu_count", "in_service_from", "retired_at")
    search_fields = ("slug", "name", "site")
    fields = ("slug", "name", "gpu_type", "gpu_count", "site", "in_service_from", "retired_at")

    def rules_check(self, checked, stored) -> None:
        super().rules_check(checked, stored)
        pool_check(stored=stored, fields=checked.validated_data)  # a closed month reached

    def write(self, checked, stored):
        return pool_write(stored=stored, fields=checked.validated_data)


@admin.register(ScrapeTarget, site=site)
class ScrapeTargetAdmin(AuditedAdmin):
    serializer = ScrapeTargetSerializer
    audit_type = "scrape_target"
    list_display = ("url", "kind", "pool", "deployment", "enabled", "last_status")
    list_filter = ("kind", "enabled", "last_status")
    fields = ("url", "kind", "pool", "deployment", "enabled", "timeout_s")
    readonly_fields = ()


class VersionInline(ReadOnlyInline):
    model = DeploymentVersion
    fields = (
        "effective_from", "r_ref", "w_in", "slo_ttft_ms", "slo_tpot_ms", "slo_ttft_ms_priority",
        "slo_tpot_ms_priority", "slo_target",
    )  # fmt: skip
    readonly_fields = fields


@admin.register(Deployment, site=site)
class DeploymentAdmin(ReadOnlyAdmin):
    list_display = ("slug", "model", "pool")
    list_filter = ("pool",)
    search_fields = ("slug",)
    inlines = [VersionInline]
