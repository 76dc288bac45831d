"""Serializer fields shared by the apps' APIs."""

import contextlib
from datetime import datetime

from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from portal.periods import FIRST_YEAR, LAST_YEAR, YEARS_MESSAGE


class AwareDateTimeField(serializers.DateTimeField):
    """An RFC 3339 timestamp within the years the portal takes (kpis.md section 0): a time
    without a zone offset is refused, not taken as UTC."""

    default_error_messages = {
        "naive": "must include a time zone offset (RFC 3339), e.g. 2026-03-01T00:00:00Z",
        "years": YEARS_MESSAGE,
    }

    def to_internal_value(self, value):
        parsed = value if isinstance(value, datetime) else None
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                parsed = parse_datetime(value.strip())
        if parsed is not None and timezone.is_naive(parsed):
            self.fail("naive")
        # Checked before the conversion to UTC, which year 1 at +01:00 cannot survive.
        if parsed is not None and not FIRST_YEAR <= parsed.year <= LAST_YEAR:
            self.fail("years")
        moment = super().to_internal_value(value)
        if not FIRST_YEAR <= moment.year <= LAST_YEAR:
            self.fail("years")
        return moment


class ModelSerializer(serializers.ModelSerializer):
    """ModelSerializer whose model DateTimeFields are AwareDateTimeFields."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: AwareDateTimeField,
    }
