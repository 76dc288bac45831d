"""Content-Security-Policy: self only, on every response, and templates that keep to it
(no inline script or style; in the browser: tests/e2e/test_csp_pages.py)."""

import re
from pathlib import Path

from django.test import Client

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'"
)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# Rendered into PDFs by WeasyPrint, never served to a browser.
PDF_DOCUMENTS = {
    "invoice_document.html", "tfom_report_document.html", "_document_style.html",
    "report_document.html", "credit_note_document.html",
}  # fmt: skip
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>|<style\b|\sstyle=|\son[a-z]+=",
    re.IGNORECASE,
)


def test_a_page_carries_the_policy(client, db):
    response = client.get("/login/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


def test_an_api_response_carries_the_policy(users, token_client):
    response = token_client(users["operator"]).get("/api/v1/pools")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


def test_error_pages_carry_the_policy(client, users):
    client.force_login(users["tenant"])
    missing = client.get("/no-such-page/")
    refused = client.get("/audit/")
    assert (missing.status_code, refused.status_code) == (404, 403)
    assert missing["Content-Security-Policy"] == POLICY
    assert refused["Content-Security-Policy"] == POLICY


def test_a_server_error_page_carries_the_policy(db, monkeypatch):
    from metering.views import sla

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sla, "status_overview", broken)
    response = Client(raise_request_exception=False).get("/status/")
    assert response.status_code == 500
    assert response["Content-Security-Policy"] == POLICY


def test_templates_hold_no_inline_script_or_style():
    found = [
        f"{path.relative_to(TEMPLATES)}:{n}: {match.group(0).strip()}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        if path.name not in PDF_DOCUMENTS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for match in INLINE.finditer(line)
    ]
    assert found == []
