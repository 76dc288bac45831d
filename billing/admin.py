"""Billing's records in the admin (portal.admin): prices and contracts are effective-dated,
so read only here (a change is a new version: the price book page or the API)."""

from django.contrib import admin

from billing.models import Contract, Price
from portal.admin import ReadOnlyAdmin, site


@admin.register(Price, site=site)
class PriceAdmin(ReadOnlyAdmin):
    list_display = ("model", "token_class", "per_million", "currency", "effective_from")
    list_filter = ("model", "token_class")


@admin.register(Contract, site=site)
class ContractAdmin(ReadOnlyAdmin):
    list_display = ("tenant", "kind", "discount_pct", "free_tokens_per_month", "effective_from")
    list_filter = ("kind",)
    search_fields = ("tenant__slug", "tenant__name")
