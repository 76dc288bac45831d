"""What the flywheel API views share: the write permission, error schema, errors, bounds."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from flywheel.domain.loop.factors import FlywheelError
from flywheel.selectors.tfom import TfomError
from portal.access import Capability
from portal.permissions import capability_permission

FactoryWrite = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)

ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT, description='{"errors": [{"field": ..., "message": ...}]}'
)

RATIO = {"max_digits": 9, "decimal_places": 6, "min_value": Decimal(0)}


def flywheel_invalid(error: FlywheelError | TfomError) -> serializers.ValidationError:
    return serializers.ValidationError({error.field: [error.message]})
