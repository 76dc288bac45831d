"""Lever applications: levers marked applied, and what the next cycle measured of them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets

from flywheel.api.loop.writes import ERRORS, FactoryWrite
from flywheel.models import LeverApplication
from flywheel.selectors.loop.cycles import application_list
from flywheel.services.loop.applications import lever_application_delete, lever_apply
from portal.api.fields import ModelSerializer


class LeverApplicationSerializer(ModelSerializer):
    """A lever put into service at `applied_at`, and what the next cycle measured."""

    lever = serializers.SlugField(source="lever.slug")
    lever_version = serializers.IntegerField(source="lever_id", read_only=True)
    evaluated_by = serializers.PrimaryKeyRelatedField(read_only=True)
    updated_lever = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = LeverApplication
        fields = [
            "id",
            "lever",
            "lever_version",
            "applied_at",
            "note",
            "baseline_start",
            "baseline_end",
            "baseline_factors",
            "projected",
            "demand",
            "evaluated_by",
            "realized",
            "updated_lever",
        ]
        read_only_fields = [
            "baseline_start",
            "baseline_end",
            "baseline_factors",
            "projected",
            "realized",
        ]


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class LeverApplicationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Levers marked applied (with the date); the next cycle measures realized against
    projected uplift and updates the lever's typical multiplier. Deletable until measured."""

    permission_classes = [FactoryWrite]
    serializer_class = LeverApplicationSerializer
    queryset = application_list()

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = lever_apply(
            slug=data["lever"]["slug"],
            applied_at=data["applied_at"],
            note=data.get("note", ""),
            demand=data.get("demand", "measured"),
            by=self.request.user,
        )

    def perform_destroy(self, instance):
        lever_application_delete(application=instance, by=self.request.user)
