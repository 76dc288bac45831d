"""Builders for flywheel tests: the worked examples' cost model (kpis.md sections 4-6)."""

from datetime import UTC, datetime
from decimal import Decimal

from flywheel.services.tfom import cost_model_create

JAN = datetime(2026, 1, 1, tzinfo=UTC)
# 43,800 per GPU over 60 months (730 per GPU-month), 1.2 kW per GPU at PUE 1.25 and 0.10 per
# kWh, hosting 100 per GPU-month; as strings, the way the API takes them.
COST_MODEL_TERMS = {
    "capex_per_gpu": "43800",
    "depreciation_months": 60,
    "power_kw_per_gpu": "1.2",
    "pue": "1.25",
    "electricity_price_per_kwh": "0.10",
    "hosting_per_gpu_month": "100",
}


def cost_model_terms(**overrides) -> dict:
    """COST_MODEL_TERMS but for `overrides`, as the services and the domain take them: money
    and ratios as Decimal, months as int."""
    terms = {**COST_MODEL_TERMS, **overrides}
    return {
        name: value if name == "depreciation_months" else Decimal(value)
        for name, value in terms.items()
    }


def make_cost_model(pool, *, effective_from=JAN, **overrides):
    """`pool`'s cost model version from `effective_from`, through the service."""
    return cost_model_create(
        pool=pool, effective_from=effective_from, **cost_model_terms(**overrides)
    )


def api_post(api, path: str, body) -> dict:
    """POST `body` as JSON through the API client `api`; the answer, which must be a success."""
    response = api.post(path, body, format="json")
    assert response.status_code in (200, 201), (path, response.json())
    return response.json()


def llama_on_p1(api) -> None:
    """Through the API: pool p1 (10 H100), llama-70b on it at R_ref 1,000 tok/s per GPU,
    input and output at 1.00 USD per million tokens list from 1 January 2026."""
    api_post(api, "/api/v1/pools", {"slug": "p1", "name": "p1", "gpu_type": "H100",
                                    "gpu_count": 10})  # fmt: skip
    api_post(api, "/api/v1/models", {"slug": "llama-70b", "name": "llama-70b"})
    api_post(api, "/api/v1/deployments", {"model": "llama-70b", "pool": "p1",
                                          "slug": "llama-70b@p1", "r_ref": "1000"})  # fmt: skip
    for token_class in ("input", "output"):
        api_post(api, "/api/v1/prices", {"model": "llama-70b", "token_class": token_class,
                                         "per_million": "1.00", "currency": "USD",
                                         "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
