"""The API's documentation: one tag per concept and a summary per operation (a
drf-spectacular postprocessing hook), so the docs read as a table of contents."""

from __future__ import annotations

# The first segment after /api/v1/ → (tag, one item, many items).
CONCEPTS: dict[str, tuple[str, str, str]] = {
    "usage": ("Usage", "usage", "usage"),
    "capacity": ("Capacity and telemetry", "capacity sample", "capacity samples"),
    "telemetry": ("Capacity and telemetry", "metrics exposition", "metrics expositions"),
    "scrape-targets": ("Capacity and telemetry", "scrape target", "scrape targets"),
    "pools": ("Factory", "pool", "pools"),
    "models": ("Factory", "model", "models"),
    "deployments": ("Factory", "deployment", "deployments"),
    "tenants": ("Tenants and access", "tenant", "tenants"),
    "audit": ("Tenants and access", "audit entry", "audit entries"),
    "prices": ("Pricing", "price version", "price versions"),
    "contracts": ("Pricing", "contract version", "contract versions"),
    "promotions": ("Pricing", "promotional credit", "promotional credits"),
    "invoices": ("Invoices and ledger", "invoice", "invoices"),
    "ledger": ("Invoices and ledger", "ledger posting", "ledger postings"),
    "sla": ("SLA and incidents", "SLA month", "SLA months"),
    "incidents": ("SLA and incidents", "incident", "incidents"),
    "maintenance": ("SLA and incidents", "maintenance window", "maintenance windows"),
    "kpis": ("KPIs and TFOM", "KPI set", "KPIs"),
    "tfom": ("KPIs and TFOM", "TFOM", "TFOM figures"),
    "cost-models": ("KPIs and TFOM", "cost model version", "cost model versions"),
    "factory-costs": ("KPIs and TFOM", "factory cost version", "factory cost versions"),
    "flywheel": ("Flywheel", "flywheel cycle", "flywheel cycles"),
    "levers": ("Flywheel", "lever version", "lever versions"),
    "lever-applications": ("Flywheel", "lever application", "lever applications"),
    "goals": ("Flywheel", "goal version", "goal versions"),
    "otlp": ("OTLP", "OTLP export", "OTLP exports"),
}
PROMETHEUS = ("Prometheus", "KPI gauge", "KPI gauges")
TAG_ORDER = [*dict.fromkeys(tag for tag, _, _ in CONCEPTS.values()), PROMETHEUS[0]]

VERBS = {"get": "Read", "post": "Create", "put": "Replace", "patch": "Change", "delete": "Delete"}


def _summary(path: str, method: str, operation: dict, one: str, many: str) -> str:
    """A collection's operations by verb and noun (List invoices, Read an invoice); any
    other operation by the first sentence of its view's description."""
    is_collection = path.endswith("/") and path.rstrip("/").rsplit("/", 1)[-1] not in ACTIONS
    if is_collection:
        if method == "get" and not path.endswith("}/"):
            return f"List {many}"
        article = "an" if one[0] in "aeiou" else "a"
        return f"{VERBS[method]} {article} {one}"
    description = (operation.get("description") or "").strip()
    sentence = description.split("\n\n")[0].replace("\n", " ").split(". ")[0].rstrip(".")
    return sentence if 0 < len(sentence) <= 90 else f"{VERBS[method]} {many}"


ACTIONS = {"finalize", "pay", "void", "updates", "versions", "cycles"}

# Operations whose view describes them at length: their summary, said here.
SUMMARIES = {
    ("get", "/api/v1/kpis"): "Every KPI of a period (factory or pool)",
    ("get", "/api/v1/tfom"): "The TFOM financial figures of a period",
    ("get", "/api/v1/sla"): "Uptime, SLO attainment and SLA credit per tenant and month",
    ("get", "/api/v1/usage"): "Usage per hour or day, tenant, model and pool",
    ("post", "/api/v1/capacity"): "Post capacity samples of pools (all or nothing)",
    ("get", "/api/v1/flywheel/diagnosis"): "Rank the factors by the EBITDA a fix would gain",
    ("post", "/api/v1/flywheel/scenarios"): "Project a period with levers or factor targets",
    ("get", "/api/v1/flywheel/cycles/"): "List flywheel cycles",
    ("post", "/api/v1/flywheel/cycles/"): "Queue a flywheel cycle",
    ("post", "/api/v1/deployments/{slug}/versions/"): "Add a deployment version",
    ("get", "/api/v1/ledger/"): "List ledger postings",
    ("post", "/api/v1/usage/events"): "Ingest a batch of usage events (JSON)",
    ("post", "/api/v1/usage/cloudevents"): "Ingest a batch of CloudEvents",
    ("post", "/api/v1/usage/openai-batch"): "Ingest an OpenAI Batch output file",
    ("post", "/api/v1/otlp/v1/traces"): "Ingest an OTLP/HTTP trace export (GenAI spans)",
    ("post", "/api/v1/otlp/v1/metrics"): "Ingest an OTLP/HTTP metric export (GenAI token usage)",
    ("get", "/api/v1/usage/rejections"): "List rejected batches and partial successes (7 days)",
    ("get", "/metrics"): "This month's KPIs in Prometheus text format",
}


def tag_and_summarise(result, generator, request, public):
    """drf-spectacular postprocessing hook: tags by concept, a summary on every operation."""
    present = set()
    for path, item in result.get("paths", {}).items():
        segment = path.removeprefix("/api/v1/").split("/", 1)[0]
        tag, one, many = CONCEPTS.get(segment, PROMETHEUS)
        for method, operation in item.items():
            if not isinstance(operation, dict) or method not in VERBS:
                continue
            operation["tags"] = [tag]
            operation["summary"] = SUMMARIES.get((method, path)) or operation.get(
                "summary", _summary(path, method, operation, one, many)
            )
            present.add(tag)
    result["tags"] = [{"name": tag} for tag in TAG_ORDER if tag in present]
    return result


def examples_as_their_schemas(result, generator, request, public):
    """drf-spectacular postprocessing hook: a request body that is an array of items gets
    its example as written (drf-spectacular wraps a list serializer's example, already a
    list of items, in a list of its own), so every example validates against its schema."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for content in operation.get("requestBody", {}).get("content", {}).values():
                if content.get("schema", {}).get("type") != "array":
                    continue
                for example in content.get("examples", {}).values():
                    value = example.get("value")
                    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
                        example["value"] = value[0]
    return result
