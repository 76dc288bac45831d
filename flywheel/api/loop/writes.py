"""What the flywheel API views share: the write permission, the error schema, bounds."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

from portal.access import Capability
from portal.permissions import capability_permission

FactoryWrite = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)

ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT, description='{"errors": [{"field": ..., "message": ...}]}'
)

RATIO = {"max_digits": 9, "decimal_places": 6, "min_value": Decimal(0)}
