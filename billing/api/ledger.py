"""The ledger's postings."""

from rest_framework import mixins, serializers, viewsets

from billing.filters import PostingFilterSet
from billing.models import Posting
from portal.access import Capability, tenant_scoped
from portal.periods import period_from_query
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


class LedgerViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Ledger postings, newest first; `from`/`to` filter the transaction time."""

    serializer_class = PostingSerializer
    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    filterset_class = PostingFilterSet

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
