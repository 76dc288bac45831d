"""Validation of decoded usage events: every field checked by hand, pure Python, no Django.

No schema library per event: this runs on every ingest request. ``validate_events``
returns the valid events (with their payload hash) and every error of every item.
Resolving tenant, model and pool slugs against the database is the caller's job.
"""

from metering.ingest.validation.fields import MAX_TOKENS, REQUIRED, EventIn, FieldError
from metering.ingest.validation.items import validate_events
from metering.ingest.validation.json_batch import validate_json_batch

__all__ = [
    "MAX_TOKENS",
    "REQUIRED",
    "EventIn",
    "FieldError",
    "validate_events",
    "validate_json_batch",
]
