"""The FOCUS 1.2 columns the portal exports (FinOps Open Cost and Usage Specification, read in
FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec at tag v1.2, commit
7296e3146fb931ee32b6496fa6e4200e7f4384f7, specification/columns/*.md): every Mandatory column,
and the Conditional and Recommended ones that apply to tokens sold by a factory. One row per
invoice line, purchase and credit note line (billing.selectors.focus).

How prepaid and balances are shown (the specification's rules for purchases that cover future
charges, effectivecost.md): a purchase is a `Purchase` row whose BilledCost is its face value
and whose EffectiveCost is 0; the usage it pays for keeps its EffectiveCost; the `prepaid` and
`credit` lines that draw a balance are `Credit` rows with their BilledCost (negative, so each
invoice's BilledCost sums to its total) and an EffectiveCost of 0, being derived from a charge
whose EffectiveCost is already counted (the purchase's 0, the credit note's own). A purchase and
its draws are never counted twice in either metric.

A reservation's month (its `reservation` line) is shown per day as kpis.md 3d says: a
`Purchase` row of the day's fees (BilledCost, EffectiveCost 0), a `Used` row of the covered
usage (BilledCost 0, EffectiveCost its realized amount) and an `Unused` row of the fees left
(EffectiveCost the day's unused fee). The days' fees are the month's line split by cumulative
rounding, so they sum to it to the cent."""

from __future__ import annotations

from dataclasses import dataclass

DECIMAL, STRING, DATETIME = "Decimal", "String", "Date/Time"


@dataclass(frozen=True)
class Column:
    name: str
    level: str  # Mandatory | Conditional | Recommended
    type: str
    nullable: bool
    allowed: tuple[str, ...] = ()


COLUMNS: tuple[Column, ...] = (
    Column("BilledCost", "Mandatory", DECIMAL, False),
    Column("BillingAccountId", "Mandatory", STRING, False),
    Column("BillingAccountName", "Mandatory", STRING, True),
    Column("BillingCurrency", "Mandatory", STRING, False),
    Column("BillingPeriodEnd", "Mandatory", DATETIME, False),
    Column("BillingPeriodStart", "Mandatory", DATETIME, False),
    Column(
        "ChargeCategory",
        "Mandatory",
        STRING,
        False,
        ("Usage", "Purchase", "Tax", "Credit", "Adjustment"),
    ),
    Column("ChargeClass", "Mandatory", STRING, True, ("Correction",)),
    Column("ChargeDescription", "Mandatory", STRING, True),
    Column("ChargePeriodEnd", "Mandatory", DATETIME, False),
    Column("ChargePeriodStart", "Mandatory", DATETIME, False),
    Column("ContractedCost", "Mandatory", DECIMAL, False),
    Column("EffectiveCost", "Mandatory", DECIMAL, False),
    Column("InvoiceIssuerName", "Mandatory", STRING, False),
    Column("ListCost", "Mandatory", DECIMAL, False),
    Column("PricingQuantity", "Mandatory", DECIMAL, True),
    Column("PricingUnit", "Mandatory", STRING, True),
    Column("ProviderName", "Mandatory", STRING, False),
    Column("PublisherName", "Mandatory", STRING, False),
    Column("ServiceCategory", "Mandatory", STRING, False, ("AI and Machine Learning",)),
    Column("ServiceName", "Mandatory", STRING, False),
    Column(
        "ChargeFrequency", "Recommended", STRING, False, ("One-Time", "Recurring", "Usage-Based")
    ),
    Column("InvoiceId", "Recommended", STRING, True),
    Column("ServiceSubcategory", "Recommended", STRING, False, ("Generative AI",)),
    Column("ConsumedQuantity", "Conditional", DECIMAL, True),
    Column("ConsumedUnit", "Conditional", STRING, True),
    Column("ContractedUnitPrice", "Conditional", DECIMAL, True),
    Column("ListUnitPrice", "Conditional", DECIMAL, True),
    Column(
        "PricingCategory",
        "Conditional",
        STRING,
        True,
        ("Standard", "Dynamic", "Committed", "Other"),
    ),
    Column("SkuId", "Conditional", STRING, True),
    Column("SkuPriceId", "Conditional", STRING, True),
    # The tenant's project a row is charged to (kpis.md 3e): `<tenant>/<project>`, its name.
    Column("SubAccountId", "Conditional", STRING, True),
    Column("SubAccountName", "Conditional", STRING, True),
    # Reservations (kpis.md 3d): commitment discounts of dedicated capacity.
    Column("CommitmentDiscountCategory", "Conditional", STRING, True, ("Spend", "Usage")),
    Column("CommitmentDiscountId", "Conditional", STRING, True),
    Column("CommitmentDiscountName", "Conditional", STRING, True),
    Column("CommitmentDiscountQuantity", "Conditional", DECIMAL, True),
    Column("CommitmentDiscountStatus", "Conditional", STRING, True, ("Used", "Unused")),
    Column("CommitmentDiscountType", "Conditional", STRING, True),
    Column("CommitmentDiscountUnit", "Conditional", STRING, True),
)
MANDATORY = tuple(c.name for c in COLUMNS if c.level == "Mandatory")
NAMES = tuple(c.name for c in COLUMNS)

PRICING_UNIT = "1000000 Tokens"  # list prices are per million tokens (unit_format.md)
CONSUMED_UNIT = "Tokens"
SERVICE_CATEGORY = "AI and Machine Learning"
SERVICE_SUBCATEGORY = "Generative AI"


def focus_time(moment) -> str:
    """Date/time as FOCUS writes it: UTC, 'YYYY-MM-DDTHH:mm:ssZ' (datetime_format.md)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def csv_value(column: Column, value) -> str:
    """A CSV cell: empty for null, decimals in plain notation, always with their fractional
    part (at least one digit: 10.0, not 10), so that a reader typing columns by their values
    (the FOCUS validator does) reads a Decimal column as decimal, never as integer."""
    if value is None:
        return ""
    if column.type == DECIMAL:
        whole, _, fraction = format(value, "f").partition(".")
        return f"{whole}.{fraction.rstrip('0') or '0'}"
    return str(value)


def arrow_table(rows: list[dict]):
    """The rows as an Apache Arrow table: decimals as decimal128(38, 12), date/times as UTC
    timestamps (milliseconds), strings as strings; every column present, nulls where null."""
    from datetime import UTC, datetime

    import pyarrow as pa

    types = {
        DECIMAL: pa.decimal128(38, 12),
        STRING: pa.string(),
        DATETIME: pa.timestamp("ms", tz="UTC"),  # Parquet keeps milliseconds, not seconds
    }

    def value(column: Column, raw):
        if raw is None or column.type != DATETIME:
            return raw
        return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)

    return pa.table(
        {
            c.name: pa.array([value(c, row.get(c.name)) for row in rows], type=types[c.type])
            for c in COLUMNS
        }
    )


COMMITMENT_TYPE = "Dedicated capacity"
COMMITMENT_UNIT = "GPU-Hours"
