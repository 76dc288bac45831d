"""Reading the body of a usage batch: Content-Encoding, size limits, JSON decoding.

Pure Python, no Django. The contract is "HTTP API" in shared/design/architecture.md:
``decode_batch`` turns a request body into plain Python objects for
``metering.ingest.validation.validate_events``; ``decompress_body`` is shared with the
telemetry push endpoint.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

import msgspec

MAX_EVENTS: Final = 10_000

MAX_BYTES: Final = 32 * 1024 * 1024  # after decompression

_GZIP_MAGIC = b"\x1f\x8b"

_UTF8_BOM = b"\xef\xbb\xbf"

# A number too large for a float (1e309) decodes to an infinity instead of failing the whole
# body, so the validator refuses it naming its field (JSON has no literal for infinity).
_JSON = msgspec.json.Decoder(float_hook=float)


class BatchError(ValueError):
    """The body as a whole cannot be read (HTTP 400); ``message`` says why."""

    http_status = 400  # the API's exception handler answers with it (portal.api.errors)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def api_errors(self) -> list[dict]:
        return [{"field": "", "message": self.message}]


class PayloadTooLarge(Exception):
    """The batch has more events or decompressed bytes than allowed (HTTP 413)."""

    http_status = 413

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def api_errors(self) -> list[dict]:
        return [{"field": "", "message": self.message}]


def decompress_body(
    *, body: bytes, content_encoding: str | None, max_bytes: int = MAX_BYTES
) -> bytes:
    """Undo ``Content-Encoding`` (none, identity or gzip), never producing more than max_bytes.

    Raises BatchError for another encoding or a broken gzip stream, PayloadTooLarge past
    max_bytes. Gzip is inflated incrementally, so a zip bomb stops at max_bytes + 1.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"the body is larger than {max_bytes} bytes")
        return bytes(body)
    if codings not in (["gzip"], ["x-gzip"]):
        raise BatchError(f"Content-Encoding {content_encoding!r} is not supported; use gzip")
    return _gunzip(bytes(body), max_bytes)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    inflater = zlib.decompressobj(wbits=31)  # gzip header and trailer required
    try:
        while True:
            # Ask for one byte more than allowed: getting it proves the body too large.
            chunk = inflater.decompress(data, max_bytes + 1 - total)
            total += len(chunk)
            if total > max_bytes:
                raise PayloadTooLarge(f"the body inflates to more than {max_bytes} bytes")
            parts.append(chunk)
            if inflater.eof:
                rest = inflater.unused_data
                if rest.startswith(_GZIP_MAGIC):  # concatenated gzip members
                    inflater, data = zlib.decompressobj(wbits=31), rest
                    continue
                if rest.strip(b"\x00"):
                    raise BatchError("the body has data after the end of the gzip stream")
                break
            data = inflater.unconsumed_tail
            if not data:
                raise BatchError("the gzip body is truncated")
    except zlib.error as exc:
        raise BatchError(f"the body is not valid gzip: {exc}") from None
    return b"".join(parts)


def decode_batch(
    *,
    body: bytes,
    content_encoding: str | None,
    max_events: int = MAX_EVENTS,
    max_bytes: int = MAX_BYTES,
) -> list[Any]:
    """Decompress and decode a JSON array of events into plain Python objects.

    Raises BatchError (malformed JSON, not UTF-8, nested too deeply, not an array) or
    PayloadTooLarge (more than max_bytes after decompression, more than max_events).
    A leading UTF-8 byte order mark is ignored (RFC 8259 allows it).
    """
    data = decompress_body(body=body, content_encoding=content_encoding, max_bytes=max_bytes)
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if not data.strip():
        raise BatchError("the body is empty; send a JSON array of events")
    decoded, problem = json_parsed(data)
    if problem:
        raise BatchError(f"the body {problem}")
    if type(decoded) is not list:
        raise BatchError(f"the body must be a JSON array of events, not {_json_kind(decoded)}")
    if len(decoded) > max_events:
        raise PayloadTooLarge(
            f"a batch holds at most {max_events} events; this one has {len(decoded)}"
        )
    return decoded


def json_parsed(data: bytes) -> tuple[Any, str]:
    """A JSON document as plain Python objects and "" (a number beyond the float range is an
    infinity, left to the validators, which name its field), or None and why it cannot be
    decoded, as every format says it of a body, a line or a record: "is not valid JSON:
    <what msgspec found>" (malformed, truncated, not UTF-8) or "…: it is nested too deeply"."""
    try:
        return _JSON.decode(data), ""
    except msgspec.DecodeError as exc:
        return None, f"is not valid JSON: {exc}"
    except RecursionError:
        return None, "is not valid JSON: it is nested too deeply"


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
