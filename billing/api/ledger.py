"""The ledger's postings."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from billing.filters import PostingFilterSet
from billing.models import Posting
from billing.selectors.ledger import ledger_postings
from portal.access import Capability
from portal.api.periods import PERIOD_PARAMETERS
from portal.periods import period_resolve
from portal.permissions import capability_permission


class PostingSerializer(serializers.ModelSerializer):
    transaction = serializers.IntegerField(source="transaction_id")
    kind = serializers.CharField(source="transaction.kind")
    memo = serializers.CharField(source="transaction.memo")
    occurred_at = serializers.DateTimeField(source="transaction.occurred_at")
    accounting_date = serializers.DateField(source="transaction.accounting_date")
    tenant = serializers.SlugRelatedField(
        source="transaction.tenant", slug_field="slug", read_only=True
    )
    reverses = serializers.IntegerField(source="transaction.reverses_id", allow_null=True)
    account = serializers.CharField(source="account.code")
    account_kind = serializers.CharField(source="account.kind")

    class Meta:
        model = Posting
        fields = [
            "id",
            "transaction",
            "kind",
            "memo",
            "occurred_at",
            "accounting_date",
            "tenant",
            "reverses",
            "account",
            "account_kind",
            "amount",
            "currency",
        ]


@extend_schema_view(
    list=extend_schema(
        summary="Ledger postings",
        description="Newest first; `period` or `from`/`to` filter the accounting date.",
        parameters=PERIOD_PARAMETERS,
    )
)
class LedgerViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Ledger postings, newest first; `period` or `from`/`to` filter the accounting date."""

    serializer_class = PostingSerializer
    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    filterset_class = PostingFilterSet

    def get_queryset(self):
        params = self.request.query_params
        period = (
            period_resolve(params).requested if {"period", "from", "to"} & set(params) else None
        )
        return ledger_postings(user=self.request.user, period=period)
