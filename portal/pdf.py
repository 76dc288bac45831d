"""PDF documents (invoices, credit notes, close and TFOM reports), rendered by WeasyPrint
from the HTML the pages show. WeasyPrint finds and loads its fonts (fontconfig, Pango) on
first use, which made a worker's first PDF take over 2 s: `pdf_warm` does that at worker
start (portal.wsgi)."""

# The documents' typeface (templates/billing/_document_style.html, the TFOM report).
DOCUMENT_FONT = '"DejaVu Sans", sans-serif'


def pdf_render(*, html: str, base_url: str) -> bytes:
    from weasyprint import HTML  # imported on use: only web workers render documents

    return HTML(string=html, base_url=base_url).write_pdf()


def pdf_warm() -> bytes:
    """Render a line in the documents' typeface, bold and regular, so the fonts are loaded
    before the first request needs them."""
    html = f"<p style='font-family: {DOCUMENT_FONT}'>Invoice <b>1.00</b></p>"
    return pdf_render(html=html, base_url="/")
