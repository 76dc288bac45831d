"""What the flywheel API views share: the write permission, the error schema, bounds, the
viewset of the factory's effective-dated inputs."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema

from portal.access import Capability
from portal.api.views import EffectiveDatedViewSet
from portal.permissions import capability_permission

FactoryWrite = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)

ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT, description='{"errors": [{"field": ..., "message": ...}]}'
)

RATIO = {"max_digits": 9, "decimal_places": 6, "min_value": Decimal(0)}


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class FactoryVersionViewSet(EffectiveDatedViewSet):
    """The factory's effective-dated inputs (cost models, factory costs, levers, goals): read
    with READ_FACTORY, written with WRITE_FACTORY; a refused write answers ERRORS."""

    permission_classes = [FactoryWrite]
