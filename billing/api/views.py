from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api.serializers import (
    ContractSerializer,
    InvoiceActionSerializer,
    InvoiceSerializer,
    PostingSerializer,
    PriceSerializer,
    PromotionSerializer,
    SlaRowSerializer,
)
from billing.models import Contract, Invoice, Posting, Price, PromotionalCredit
from billing.selectors import period_months
from billing.services.invoicing import InvoiceError, invoice_finalize, invoice_pay, invoice_void
from billing.services.pricing import PricingError, contract_create, price_create, promotion_grant
from billing.services.sla import sla_figures_list
from portal import clock
from portal.access import Capability, tenant_get, tenant_scoped
from portal.api.pagination import Pagination
from portal.periods import period_from_query
from portal.permissions import capability_permission
from portal.services import audit_record, audit_snapshot

CommercialRead = capability_permission(
    read=Capability.READ_TENANT_DATA, write=Capability.WRITE_COMMERCIAL
)


class EffectiveDatedViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Create-only once in force: a version is never edited, and only deleted before its
    effective_from (a mistake caught in time); later terms are a new version."""

    audit_type = ""

    def perform_create(self, serializer):
        try:
            serializer.instance = self.create_version(serializer.validated_data)
        except PricingError as error:
            raise serializers.ValidationError({error.field: [error.message]}) from None

    @transaction.atomic
    def perform_destroy(self, instance):
        if instance.effective_from <= clock.now():
            raise serializers.ValidationError(
                {"effective_from": ["in force: add a new version instead of deleting this one"]}
            )
        before = audit_snapshot(instance)
        pk = instance.pk
        instance.delete()
        audit_record(
            actor=self.request.user,
            action=f"{self.audit_type}.delete",
            object_type=self.audit_type,
            object_id=pk,
            before=before,
        )


class PriceViewSet(EffectiveDatedViewSet):
    """List prices per million tokens, per model and token class, effective-dated."""

    serializer_class = PriceSerializer
    audit_type = "price"
    permission_classes = [
        capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_COMMERCIAL)
    ]
    filterset_fields = {"model__slug": ["exact"], "token_class": ["exact"]}
    queryset = Price.objects.select_related("model")

    def create_version(self, data):
        return price_create(**data, by=self.request.user)


class ContractViewSet(EffectiveDatedViewSet):
    """Contract versions per tenant (members see their own)."""

    serializer_class = ContractSerializer
    audit_type = "contract"
    permission_classes = [CommercialRead]
    filterset_fields = {"tenant__slug": ["exact"], "kind": ["exact"]}

    def get_queryset(self):
        return tenant_scoped(Contract.objects.select_related("tenant"), user=self.request.user)

    def create_version(self, data):
        data.setdefault("currency", settings.FACTORY_CURRENCY)
        tiers = [dict(tier) for tier in data.pop("volume_tiers", [])]
        credit_tiers = data.pop("credit_tiers", None)
        return contract_create(
            **data, volume_tiers=tiers, credit_tiers=credit_tiers, by=self.request.user
        )


class PromotionViewSet(EffectiveDatedViewSet):
    """Promotional credits (money, optional expiry), consumed before cash."""

    serializer_class = PromotionSerializer
    audit_type = "promotion"
    permission_classes = [CommercialRead]
    filterset_fields = {"tenant__slug": ["exact"]}

    def get_queryset(self):
        return tenant_scoped(
            PromotionalCredit.objects.select_related("tenant").prefetch_related("uses__invoice"),
            user=self.request.user,
        )

    def create_version(self, data):
        data.setdefault("currency", settings.FACTORY_CURRENCY)
        return promotion_grant(**data, by=self.request.user)


class InvoiceViewSet(viewsets.ReadOnlyModelViewSet):
    """Invoices with their lines; finance finalizes, records payment, voids."""

    serializer_class = InvoiceSerializer
    permission_classes = [CommercialRead]
    filterset_fields = {"tenant__slug": ["exact"], "status": ["exact"], "number": ["exact"]}

    def get_queryset(self):
        return tenant_scoped(
            Invoice.objects.select_related("tenant").prefetch_related("lines"),
            user=self.request.user,
        )

    def _act(self, operation, **kwargs):
        invoice = self.get_object()
        try:
            invoice = operation(invoice=invoice, by=self.request.user, **kwargs)
        except InvoiceError as error:
            raise serializers.ValidationError({"status": [str(error)]}) from None
        return Response(self.get_serializer(self.get_queryset().get(pk=invoice.pk)).data)

    @extend_schema(request=None, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def finalize(self, request, pk=None):
        """Issue a draft: number it and post it to the ledger."""
        return self._act(invoice_finalize)

    @extend_schema(request=None, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def pay(self, request, pk=None):
        """Record the payment of an issued invoice."""
        return self._act(invoice_pay)

    @extend_schema(request=InvoiceActionSerializer, responses=InvoiceSerializer)
    @action(detail=True, methods=["post"])
    def void(self, request, pk=None):
        """Void an issued invoice by a linked ledger reversal."""
        body = InvoiceActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(invoice_void, reason=body.validated_data["reason"])


class LedgerViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Ledger postings, newest first; `from`/`to` filter the transaction time."""

    serializer_class = PostingSerializer
    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    filterset_fields = {
        "account__code": ["exact"],
        "transaction__tenant__slug": ["exact"],
        "transaction__kind": ["exact"],
    }

    def get_queryset(self):
        postings = tenant_scoped(
            Posting.objects.select_related("transaction__tenant", "account"),
            user=self.request.user,
            field="transaction__tenant",
        ).order_by("-transaction__occurred_at", "-id")
        if "from" in self.request.query_params or "to" in self.request.query_params:
            period = period_from_query(self.request.query_params)
            postings = postings.filter(
                transaction__occurred_at__gte=period.start,
                transaction__occurred_at__lt=period.end,
            )
        return postings


def _ratio(value):
    return None if value is None else float(value)


class SlaView(APIView):
    """Uptime, SLO attainment, σ and the SLA credit per tenant and UTC month of [from, to)
    (default: this month so far); members see their own tenant."""

    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    pagination_class = Pagination  # documents the paginated envelope in the schema

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str, description="tenant slug"),
            OpenApiParameter("from", str, description="RFC 3339 or YYYY-MM-DD"),
            OpenApiParameter("to", str, description="RFC 3339 or YYYY-MM-DD"),
        ],
        responses=SlaRowSerializer(many=True),
    )
    def get(self, request):
        period = period_from_query(request.query_params)
        slug = request.query_params.get("tenant")
        tenants = [tenant_get(user=request.user, slug=slug)] if slug else None
        rows = []
        for month in period_months(period):
            for figures in sla_figures_list(month_start=month, tenants=tenants, user=request.user):
                sla = figures.sla
                rows.append(
                    {
                        "tenant": sla.tenant.slug,
                        "month": sla.month,
                        "is_month_to_date": sla.is_month_to_date,
                        "uptime": _ratio(sla.uptime),
                        "slo_attainment": _ratio(sla.slo_attainment),
                        "sla_delivery": _ratio(sla.sla_delivery),
                        "target": _ratio(figures.target),
                        "credit_pct": figures.credit_pct,
                        "credit_amount": figures.credit_amount,
                        "currency": figures.currency,
                        "is_posted": figures.is_posted,
                        "incidents": [incident.pk for incident in sla.incidents],
                    }
                )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(SlaRowSerializer(page, many=True).data)
