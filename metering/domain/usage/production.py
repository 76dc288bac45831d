"""What a request made, in output-token units (kpis.md section 1): the one definition. The
KPIs (flywheel) and the SLA's σ (metering) both weigh production by it."""

from decimal import Decimal
from fractions import Fraction
from typing import overload


@overload
def production_tokens(
    *, output_tokens: int, input_tokens: int, cached_tokens: int, w_in: Decimal
) -> Decimal: ...


@overload
def production_tokens(
    *, output_tokens: int, input_tokens: int, cached_tokens: int, w_in: Fraction
) -> Fraction: ...


def production_tokens(
    *, output_tokens: int, input_tokens: int, cached_tokens: int, w_in: Decimal | Fraction
) -> Decimal | Fraction:
    """tok = output + w_in × (input − cached): input computed afresh costs w_in output tokens
    each, cached input nothing. Exact for a Fraction w_in; a Decimal one is computed in the
    caller's decimal context (the KPIs use theirs, KPI_CONTEXT)."""
    if not 0 <= cached_tokens <= input_tokens or output_tokens < 0:
        raise ValueError("token counts need 0 <= cached <= input and output >= 0")
    if w_in < 0:
        raise ValueError("w_in must be non-negative")
    return output_tokens + w_in * (input_tokens - cached_tokens)


def production_weights(*, w_in: Fraction) -> tuple[Fraction, Fraction, Fraction]:
    """tok per output, input and cached token: production_tokens is linear in the counts, so
    tok = output × the first + input × the second + cached × the third (what a reader summing
    many counts at one w_in multiplies once, exactly)."""
    per_output = production_tokens(output_tokens=1, input_tokens=0, cached_tokens=0, w_in=w_in)
    per_input = production_tokens(output_tokens=0, input_tokens=1, cached_tokens=0, w_in=w_in)
    both = production_tokens(output_tokens=0, input_tokens=1, cached_tokens=1, w_in=w_in)
    return per_output, per_input, both - per_input
