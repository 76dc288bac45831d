"""Every page of every role, and every export, reads as a person writes: no Python or
machine spelling in the visible text (1E+1, 0E-10, None, NaN, inf, a dict or a Decimal, a
raw ISO timestamp, -0.0, a raw float of more than 5 decimals, cached_input; a tier's price per
million may need 5: 0.175 × 1.75 = 0.30625). CSV cells read
back with the csv module as numbers where they are figures (never more than 10 decimals);
XLSX figure cells are numbers, never formulas. So do the alerts, with one of each kind
firing: their inbox entries, their webhook payloads' summaries and their emails.

Every page of every role, with one alert of each kind firing, fits at 1280 px (and 1440 px in
`make soak`): nothing wider than the viewport, no
element whose content spills out of it or is clipped (a table that needs a scroll bar
counts), no chart text (tick, title, legend, note) cut by the chart's edge, and no legend
over the x axis's tick labels or title. Every control has its label, and text its WCAG AA
contrast."""

import csv
import io
import json
import re

import pytest
from django.contrib.auth.models import User

from billing.domain.rating.types import TokenClass
from portal.demo import DEMO_LOGINS
from tests.conftest import SOAK
from tests.e2e.conftest import login, role_pages, screenshot

pytestmark = pytest.mark.e2e

MACHINE_TEXT = {
    "exponent": re.compile(r"\d[eE][+-]\d"),
    "None": re.compile(r"\bNone\b"),
    "NaN": re.compile(r"\bNaN\b"),
    "inf": re.compile(r"(?<![\w-])-?inf\b", re.IGNORECASE),
    "a dict": re.compile(r"\{'"),
    "a Python literal": re.compile(r"\bDecimal\(|\['|\bFraction\("),
    "a raw ISO timestamp": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d"),
    "a negative zero": re.compile(r"(?<![\w.])[-−]0(?:\.0+)?(?![\d.,])"),
    "more than 10 decimals": re.compile(r"\d\.\d{11,}"),
    "a raw float": re.compile(r"\d\.\d{6,}"),
    "a raw token class name": re.compile(
        "|".join(rf"\b{c.value}\b" for c in TokenClass if "_" in c.value)
    ),
}


def _machine_text(text: str, *, but: tuple[str, ...] = ()) -> list[str]:
    found = []
    for name, pattern in MACHINE_TEXT.items():
        if name in but:
            continue
        for match in pattern.finditer(text):
            found.append(f"{name}: …{text[max(0, match.start() - 40) : match.end() + 40]}…")
    return found


# The narrowest width a page must fit, and in `make soak` a wider one too (a layout that
# fits 1,280 px and breaks wider is rarer than the time a second tour costs in CI).
WIDTHS = (1280, 1440) if SOAK else (1280,)

# What does not fit, in words; a visually hidden label (1 px by design) is not a defect.
OVERFLOWS = """() => {
  const problems = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\\s+/).join('.') : '') +
    ' "' + (el.innerText || '').trim().slice(0, 40).replace(/\\s+/g, ' ') + '"';
  const viewport = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > viewport + 1)
    problems.push(`the page is ${document.documentElement.scrollWidth} px wide in ${viewport} px`);
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.js-plotly-plot, svg, script, style, .visually-hidden')) continue;
    const display = getComputedStyle(el).display;
    if (display === 'inline' || display === 'none' || display === 'contents') continue;
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
      problems.push(`${name(el)}: ${el.scrollWidth} px of content in ${el.clientWidth} px`);
  }
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const box = plot.getBoundingClientRect();
    for (const text of plot.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      if (!text.textContent.trim() || r.width === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
          r.bottom > box.bottom + 1)
        problems.push(`chart #${plot.id}: "${text.textContent}" cut`);
    }
    const boxes = sel => [...plot.querySelectorAll(sel)].filter(t => t.textContent.trim())
      .map(t => [t.textContent, t.getBoundingClientRect()]);
    const axis = boxes('.xtick text, .g-xtitle text');
    for (const [label, r] of boxes('.legend text'))
      for (const [tick, a] of axis)
        if (r.left < a.right - 1 && a.left < r.right - 1 && r.top < a.bottom - 1 && a.top < r.bottom - 1)
          problems.push(`chart #${plot.id}: legend "${label}" over "${tick}"`);
  }
  return problems;
}"""

# ui.md, Accessibility: a label on every control (its own: no id on two elements), and
# text at WCAG AA contrast against the first opaque background behind it (4.5, or 3 for
# large text).
ACCESSIBILITY = """() => {
  const problems = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.name ? `[name=${el.name}]` : '');
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || el.closest('.js-plotly-plot')) continue;
    if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label') &&
        !el.getAttribute('aria-labelledby') && !el.title)
      problems.push(`no label: ${name(el)}`);
  }
  const ids = {};
  for (const el of document.querySelectorAll('[id]'))
    if (!el.closest('.js-plotly-plot, svg')) ids[el.id] = (ids[el.id] || 0) + 1;
  for (const [id, count] of Object.entries(ids))
    if (count > 1) problems.push(`id ${id} on ${count} elements`);
  const rgb = text => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(',').map(Number);
    return {r, g, b, a};
  };
  const luminance = c => [c.r, c.g, c.b].map(v => (v /= 255) <= 0.03928 ? v / 12.92 :
    ((v + 0.055) / 1.055) ** 2.4).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const behind = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return {r: 255, g: 255, b: 255, a: 1};
  };
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.js-plotly-plot, svg, script, style, option')) continue;
    if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || !el.getClientRects().length) continue;
    const [fg, bg] = [rgb(style.color), behind(el)];
    const [l1, l2] = [luminance(fg), luminance(bg)];
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (parseInt(style.fontWeight) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5))
      problems.push(`contrast ${ratio.toFixed(2)}: ${name(el)} "${el.textContent.trim().slice(0, 30)}"`);
  }
  return problems;
}"""

CHARTS_DRAWN = (
    "() => [...document.querySelectorAll('[data-figure]')]"
    ".every(e => e.classList.contains('js-plotly-plot'))"
)


@pytest.mark.parametrize("login_name", [name for name, *_ in DEMO_LOGINS])
def test_every_page_of_every_role_reads_right_and_fits_its_width(login_name, demo_alerting, page):
    """One visit of every page at each width, one alert of each kind firing: its text at the
    first, its layout at both."""
    username, password, role, _ = next(d for d in DEMO_LOGINS if d[0] == login_name)
    login(page, username, password)
    paths = role_pages(page, role)
    problems = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in paths:
            response = page.goto(path)  # loaded: its scripts and styles (no web fonts)
            assert response.status == 200, path
            page.wait_for_function(CHARTS_DRAWN)
            found = page.evaluate(OVERFLOWS)
            if width == WIDTHS[0]:
                found += _machine_text(page.inner_text("body"))
                found += page.evaluate(ACCESSIBILITY)
            if found:
                problems[f"{path} at {width} px"] = found[:4]
                name = path.strip("/").replace("/", "-")
                screenshot(page, f"every-page-{login_name}-{width}-{name}")
    screenshot(page, f"every-page-{login_name}")
    assert problems == {}


def test_every_alert_reads_in_words_in_the_inbox_its_webhooks_and_emails(demo_alerting):
    """Each alert's event, one of each kind firing (and the demo's fired and resolved the
    last day), read as its receivers read it: the inbox entry (its summary), the summary
    in the webhook payload's data, and the email's subject and body."""
    from portal.alert_kinds import KINDS
    from portal.delivery import email_of
    from portal.models import Alert, Event
    from portal.webhooks import event_body

    events = Event.objects.filter(data__has_key="alert").select_related("tenant")
    operator = User.objects.get(username="operator")
    read, kinds = {}, set()
    for event in events:
        kinds.add(event.data["kind"])
        payload = json.loads(event_body(event))
        assert payload["data"]["summary"] == event.summary
        subject, body = email_of(event, user=operator)
        for where, text in (("inbox", event.summary), ("email subject", subject),
                            ("email", body)):  # fmt: skip
            if found := _machine_text(text):
                read[f"{event.data['kind']} {event.type} {where}"] = found
    assert kinds == set(KINDS) == set(Alert.objects.values_list("rule__kind", flat=True))
    assert read == {}


EXPORTS = {
    "finance": [
        "/usage/?period=last_month&format=csv",
        "/billing/invoices/?format=csv",
        "/billing/ledger/?period=last_month&format=csv",
        "/reports/tfom/?period=last_month&format=csv",
        "/api/v1/capacity-plan?format=csv",
    ],
}


def test_every_export_writes_numbers_as_numbers_and_no_formula(demo, page):
    from openpyxl import load_workbook

    login(page, "finance", "finance-demo")
    page.goto("/billing/invoices/")
    invoice = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    invoice_csv = next(h for h in invoice if re.match(r"^/billing/invoices/\d+/$", h)) + "csv/"
    for path in [*EXPORTS["finance"], invoice_csv]:
        response = page.request.get(path)
        assert response.status == 200, path
        text = response.text()
        assert _machine_text_but_timestamps(text) == [], path
        rows = list(csv.reader(io.StringIO(text)))
        header, body = rows[0], rows[1:]
        assert body, path
        for row in body:
            for name, cell in zip(header, row, strict=True):
                if name in NUMERIC and cell:
                    float(cell)  # a number, negatives without a text quote
                    assert not cell.startswith("'"), (path, name, cell)
    xlsx = page.request.get("/reports/tfom/?period=last_month&format=xlsx")
    book = load_workbook(io.BytesIO(xlsx.body()))
    negatives = 0
    for sheet in book.worksheets[1:]:
        for row in sheet.iter_rows(min_row=2):
            value = row[1]
            assert value.data_type != "f", (sheet.title, value.coordinate)
            if value.value is not None and row[2].value not in (None, ""):
                assert value.data_type == "n", (sheet.title, row[0].value, value.value)
                negatives += value.value < 0
    assert negatives > 0  # the SLA credits and discounts are negative numbers, as numbers


NUMERIC = {
    "requests", "errors", "input_tokens", "cached_tokens", "cache_write_tokens",
    "output_tokens", "reasoning_tokens", "total", "amount", "quantity", "list_amount",
    "discount", "list_unit_price", "value",
}  # fmt: skip


def _machine_text_but_timestamps(text: str) -> list[str]:
    """A CSV's time columns carry RFC 3339 times and its token_class column the class's
    identifier (what accounting systems read): all else reads as on the pages."""
    return _machine_text(
        re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?", "", text),
        # A CSV's token_class column holds the identifier; its figures are unrounded.
        but=("a raw token class name", "a raw float"),
    )
