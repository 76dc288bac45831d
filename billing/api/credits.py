"""SLA attainment and credits per tenant-month."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from billing.selectors.credits import sla_figures_list
from metering.selectors.usage import metered_months, window_resolve
from portal.access import Capability, tenant_get
from portal.api.pagination import Pagination
from portal.api.periods import PERIOD_PARAMETERS
from portal.permissions import capability_permission


class TierSlaSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    compliant_requests = serializers.IntegerField()
    slo_attainment = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    sla_delivery = serializers.FloatField(allow_null=True, help_text="σ, ratio in [0, 1]")


class SlaRowSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    month = serializers.CharField(help_text="YYYY-MM")
    is_month_to_date = serializers.BooleanField()
    uptime = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    slo_target = serializers.FloatField(
        allow_null=True,
        help_text="the SLO attainment target: the contract's slo_target, else the "
        "request-weighted slo_target of the deployments the tenant used",
    )
    slo_attainment = serializers.FloatField(allow_null=True, help_text="ratio in [0, 1]")
    sla_delivery = serializers.FloatField(allow_null=True, help_text="σ, ratio in [0, 1]")
    target = serializers.FloatField(
        allow_null=True, help_text="the uptime target (the contract's highest credit threshold)"
    )
    credit_pct = serializers.DecimalField(
        max_digits=7, decimal_places=4, help_text="a percentage: 10 means 10%"
    )
    credit_amount = serializers.DecimalField(max_digits=20, decimal_places=2, allow_null=True)
    currency = serializers.CharField()
    is_posted = serializers.BooleanField(help_text="the month is closed and its credit posted")
    incidents = serializers.ListField(child=serializers.IntegerField())
    by_tier = serializers.DictField(
        child=TierSlaSerializer(),
        help_text="per service tier the tenant sent requests at: its attainment and σ, each "
        "tier judged by its own SLO (priority's thresholds; flex and batch none)",
    )


def _json_ratio(value):
    return None if value is None else float(value)


class SlaView(APIView):
    """Uptime, SLO attainment, σ and the SLA credit per tenant and UTC month of [from, to)
    (default: this month so far); members see their own tenant."""

    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    pagination_class = Pagination  # documents the paginated envelope in the schema

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str, description="tenant slug"),
            *PERIOD_PARAMETERS,
        ],
        responses=SlaRowSerializer(many=True),
    )
    def get(self, request):
        period = window_resolve(request.query_params).period
        slug = request.query_params.get("tenant")
        tenants = [tenant_get(user=request.user, slug=slug)] if slug else None
        rows = []
        # Months without metered usage have no SLA to report: the work follows the data,
        # not the length of the period.
        for month in metered_months(within=[period]):
            for figures in sla_figures_list(month_start=month, tenants=tenants, user=request.user):
                sla = figures.sla
                rows.append(
                    {
                        "tenant": sla.tenant.slug,
                        "month": sla.month,
                        "is_month_to_date": sla.is_month_to_date,
                        "uptime": _json_ratio(sla.uptime),
                        "slo_target": _json_ratio(figures.slo_target),
                        "slo_attainment": _json_ratio(sla.slo_attainment),
                        "sla_delivery": _json_ratio(sla.sla_delivery),
                        "target": _json_ratio(figures.target),
                        "credit_pct": figures.credit_pct,
                        "credit_amount": figures.credit_amount,
                        "currency": figures.currency,
                        "is_posted": figures.is_posted,
                        "incidents": [incident.pk for incident in sla.incidents],
                        "by_tier": {
                            tier: {
                                "requests": made.requests,
                                "compliant_requests": made.compliant_requests,
                                "slo_attainment": _json_ratio(made.slo_attainment),
                                "sla_delivery": _json_ratio(made.sla_delivery),
                            }
                            for tier, made in sla.by_tier.items()
                        },
                    }
                )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(SlaRowSerializer(page, many=True).data)
