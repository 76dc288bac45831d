"""The PDF renderer's warm-up (portal.pdf, run by portal.wsgi before the first request)."""

import logging

from portal.pdf import pdf_warm


def test_the_warm_up_renders_in_the_documents_typeface_without_a_css_warning(caplog):
    """Its style attribute was cut short by the typeface's own quotes ("font-family: "), so
    every start-up logged a warning and warmed the default font instead."""
    with caplog.at_level(logging.WARNING, logger="weasyprint"):
        pdf = pdf_warm()

    assert [r.getMessage() for r in caplog.records if r.name == "weasyprint"] == []
    assert pdf.startswith(b"%PDF-")
