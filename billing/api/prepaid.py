"""Prepaid purchases and a tenant's balances (credit and prepaid) with their movements."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api.pricing import CommercialRead
from billing.selectors.balances import (
    balance_movements,
    credit_balance,
    prepaid_list,
    prepaid_remaining,
)
from billing.services.prepaid import prepaid_purchase
from portal.access import tenant_get
from portal.api.fields import MoneyField
from portal.money import money_str
from portal.periods import instant_parse


def _money(amount) -> str:
    return money_str(amount=amount, currency=settings.FACTORY_CURRENCY)


class PrepaidIn(serializers.Serializer):
    tenant = serializers.CharField()
    amount = MoneyField(positive=True, help_text='face value, e.g. "10000.00"')
    currency = serializers.CharField(
        required=False, help_text="the ledger's currency (FACTORY_CURRENCY), the only one taken"
    )
    starts_at = serializers.CharField(required=False, help_text="a whole UTC day (default today)")
    expires_at = serializers.CharField(help_text="the last whole UTC day it is usable")


def balances_json(tenant) -> dict:
    prepaid = prepaid_list(tenant=tenant)
    return {
        "tenant": tenant.slug,
        "currency": settings.FACTORY_CURRENCY,
        "credit": _money(credit_balance(tenant=tenant)),
        "prepaid": [
            {
                "id": balance.pk,
                "amount": _money(balance.amount),
                "remaining": _money(prepaid_remaining(balance)),
                "starts_at": balance.starts_at.isoformat(),
                "expires_at": balance.expires_at.isoformat(),
                "invoice": balance.invoice.number,
            }
            for balance in prepaid
        ],
        "movements": [
            {
                "time": move.time.isoformat(),
                "kind": move.kind,
                "balance": move.balance,
                "amount": _money(move.amount),
                "document": move.document,
            }
            for move in balance_movements(tenant=tenant)
        ],
    }


class PrepaidView(APIView):
    """A prepaid purchase: invoiced at once on its own purchase invoice, booked as deferred
    revenue, drawn by the month-end closes, its unused rest breakage on its expiry day."""

    permission_classes = [CommercialRead]

    @extend_schema(request=PrepaidIn, responses={201: dict})
    def post(self, request):
        body = PrepaidIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = tenant_get(user=request.user, slug=data["tenant"])
        balance = prepaid_purchase(
            tenant=tenant,
            amount=data["amount"],
            currency=data.get("currency"),
            starts_at=instant_parse(data["starts_at"], "starts_at")
            if "starts_at" in data
            else None,
            expires_at=instant_parse(data["expires_at"], "expires_at"),
            by=request.user,
        )
        return Response(
            {
                "id": balance.pk,
                "tenant": tenant.slug,
                "amount": _money(balance.amount),
                "starts_at": balance.starts_at.isoformat(),
                "expires_at": balance.expires_at.isoformat(),
                "invoice": balance.invoice.number,
            },
            status=status.HTTP_201_CREATED,
        )


class BalancesView(APIView):
    """A tenant's credit balance and prepaid balances with every movement (staff any tenant,
    a member its own)."""

    permission_classes = [CommercialRead]

    @extend_schema(responses={200: dict})
    def get(self, request, slug: str):
        return Response(balances_json(tenant_get(user=request.user, slug=slug)))
