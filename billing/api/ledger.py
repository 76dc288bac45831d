"""The ledger's postings."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from billing.filters import PostingFilterSet
from billing.models import Posting
from portal.access import Capability, tenant_scoped
from portal.api.periods import PERIOD_PARAMETERS
from portal.periods import period_resolve
from portal.permissions import capability_permission


class PostingSerializer(serializers.ModelSerializer):
    transaction = serializers.IntegerField(source="transaction_id")
    kind = serializers.CharField(source="transaction.kind")
    memo = serializers.CharField(source="transaction.memo")
    occurred_at = serializers.DateTimeField(source="transaction.occurred_at")
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
        description="Newest first; `period` or `from`/`to` filter the transaction time.",
        parameters=PERIOD_PARAMETERS,
    )
)
class LedgerViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Ledger postings, newest first; `period` or `from`/`to` filter the transaction time."""

    serializer_class = PostingSerializer
    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    filterset_class = PostingFilterSet

    def get_queryset(self):
        postings = tenant_scoped(
            Posting.objects.select_related("transaction__tenant", "account"),
            user=self.request.user,
            field="transaction__tenant",
        ).order_by("-transaction__occurred_at", "-id")
        if {"period", "from", "to"} & set(self.request.query_params):
            period = period_resolve(self.request.query_params).requested
            postings = postings.filter(
                transaction__occurred_at__gte=period.start,
                transaction__occurred_at__lt=period.end,
            )
        return postings
