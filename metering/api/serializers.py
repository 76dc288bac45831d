from decimal import Decimal

from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from metering.models import Deployment, DeploymentVersion, Pool, ServedModel
from portal.api.fields import AwareDateTimeField, ModelSerializer


class PoolSerializer(serializers.ModelSerializer):
    class Meta:
        model = Pool
        fields = ["slug", "name", "gpu_type", "gpu_count", "site"]


class AliasesField(serializers.ListField):
    """Alias names in, alias names out (from the model's related aliases)."""

    def to_representation(self, data):
        return sorted(alias.alias for alias in data.all())


INT_MAX = 2**31 - 1  # the largest value of an integer column

# Model and deployment names carry versions and pools: "llama-3.3-70b", "llama-3.3-70b@h100-a".
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"
NAME_HELP = "letters, digits and . _ @ - (e.g. llama-3.3-70b@h100-a)"


def name_field(model, max_length: int) -> serializers.RegexField:
    return serializers.RegexField(
        NAME_PATTERN,
        max_length=max_length,
        help_text=NAME_HELP,
        error_messages={"invalid": f"Use {NAME_HELP}."},
        validators=[UniqueValidator(queryset=model.objects.all())],
    )


class ServedModelSerializer(serializers.ModelSerializer):
    slug = name_field(ServedModel, 100)
    aliases = AliasesField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Engine names that resolve to this model (vLLM model_name, batch `model`).",
    )

    class Meta:
        model = ServedModel
        fields = ["slug", "name", "aliases"]


class DeploymentVersionSerializer(ModelSerializer):
    class Meta:
        model = DeploymentVersion
        fields = [
            "effective_from",
            "r_ref",
            "w_in",
            "slo_ttft_ms",
            "slo_tpot_ms",
            "slo_min_tokens_per_s",
        ]


class DeploymentSerializer(serializers.ModelSerializer):
    slug = name_field(Deployment, 150)
    model = serializers.SlugRelatedField(slug_field="slug", queryset=ServedModel.objects.all())
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    r_ref = serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        write_only=True,
        help_text="output tokens/s per GPU",
    )
    w_in = serializers.DecimalField(
        max_digits=8, decimal_places=6, min_value=Decimal(0), default=Decimal(0), write_only=True
    )
    slo_ttft_ms = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    slo_tpot_ms = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, write_only=True
    )
    versions = DeploymentVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "slug",
            "model",
            "pool",
            "r_ref",
            "w_in",
            "slo_ttft_ms",
            "slo_tpot_ms",
            "versions",
        ]


class CapacitySampleSerializer(serializers.Serializer):
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all())
    time = AwareDateTimeField()
    interval_s = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True
    )
    gpus_installed = serializers.IntegerField(min_value=0, max_value=10_000_000)
    gpus_healthy = serializers.IntegerField(min_value=0, max_value=10_000_000)
    gpus_busy = serializers.IntegerField(min_value=0, max_value=10_000_000)
    power_w = serializers.DecimalField(
        max_digits=14, decimal_places=3, min_value=Decimal(0), required=False, allow_null=True
    )

    def validate(self, attrs):
        if attrs["gpus_healthy"] > attrs["gpus_installed"]:
            raise serializers.ValidationError({"gpus_healthy": "must not exceed gpus_installed"})
        if attrs["gpus_busy"] > attrs["gpus_healthy"]:
            raise serializers.ValidationError({"gpus_busy": "must not exceed gpus_healthy"})
        return attrs


class UsageEventDoc(serializers.Serializer):
    """Documentation of one usage event (validated by hand for speed, not by this class)."""

    id = serializers.CharField(max_length=128, help_text="Idempotency key, unique per source")
    source = serializers.CharField(max_length=128, required=False, default="default")
    time = serializers.DateTimeField(help_text="Request end, RFC 3339 with a zone")
    tenant = serializers.SlugField()
    model = serializers.CharField(help_text="Served model slug or alias")
    pool = serializers.SlugField(required=False)
    input_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    cached_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    output_tokens = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    ttft_ms = serializers.FloatField(min_value=0, required=False)
    tpot_ms = serializers.FloatField(min_value=0, required=False)
    latency_ms = serializers.FloatField(min_value=0, required=False)
    status = serializers.ChoiceField(choices=["ok", "error"], required=False, default="ok")


class IngestResultSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()


class ErrorItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(required=False)
    field = serializers.CharField()
    message = serializers.CharField()


class ErrorsSerializer(serializers.Serializer):
    errors = ErrorItemSerializer(many=True)


class UsageRowSerializer(serializers.Serializer):
    period_start = serializers.DateTimeField()
    tenant = serializers.CharField()
    model = serializers.CharField()
    pool = serializers.CharField()
    requests = serializers.IntegerField()
    errors = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
