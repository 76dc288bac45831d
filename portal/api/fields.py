"""Serializer fields shared by the apps' APIs."""

import contextlib
from datetime import datetime
from decimal import Decimal

from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from portal.errors import FieldError
from portal.money import (
    MONEY_MAXIMUM,
    MONEY_PLACES,
    UNIT_PRICE_MAXIMUM,
    UNIT_PRICE_PLACES,
    money_parse,
)
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


class MoneyField(serializers.DecimalField):
    """A money input (portal.money.money_parse): a plain decimal of at most 2 places from 0
    (above 0 when `positive`) to 10^12, or `unit_price` one of at most 4 places up to 10^9;
    sent back as a decimal string with `decimal_places` (default: those), as stored."""

    def __init__(
        self,
        *,
        unit_price: bool = False,
        positive: bool = False,
        signed: bool = False,
        decimal_places: int | None = None,
        **kwargs,
    ) -> None:
        places = UNIT_PRICE_PLACES if unit_price else MONEY_PLACES
        maximum = UNIT_PRICE_MAXIMUM if unit_price else MONEY_MAXIMUM
        self.rule = {"places": places, "positive": positive, "signed": signed, "maximum": maximum}
        shown = places if decimal_places is None else decimal_places
        super().__init__(
            max_digits=maximum.adjusted() + 1 + shown,
            decimal_places=shown,
            min_value=-maximum if signed else Decimal(0),
            max_value=maximum,
            **kwargs,
        )

    def to_internal_value(self, data):
        try:
            amount = money_parse(data, field="", **self.rule)
        except FieldError as error:
            raise serializers.ValidationError(error.message) from None
        return self.quantize(amount)


class ModelSerializer(serializers.ModelSerializer):
    """ModelSerializer whose model DateTimeFields are AwareDateTimeFields."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: AwareDateTimeField,
    }
