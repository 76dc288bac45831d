"""The period parameters every read operation takes, documented once (kpis.md section 0)."""

from drf_spectacular.utils import OpenApiParameter

from portal.periods import PRESETS

PERIOD_PARAMETERS = [
    OpenApiParameter(
        "period",
        str,
        description=(
            f"{', '.join(PRESETS)}, a month YYYY-MM or a quarter YYYY-Qn (default this_month);"
            " or give from/to instead"
        ),
    ),
    OpenApiParameter(
        "from", str, description="a whole UTC hour, RFC 3339 or YYYY-MM-DD, years 2000–2100"
    ),
    OpenApiParameter(
        "to", str, description="a whole UTC hour (excluded), at most 3 years after from"
    ),
]
