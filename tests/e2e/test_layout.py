"""Every page of every role fits at 1280 and 1440 px: nothing wider than the viewport, no
element whose content spills out of it or is clipped (a table that needs a scroll bar
counts), and no chart text (tick, title, legend, note) cut by the chart's edge."""

import pytest

from portal.demo import DEMO_LOGINS
from tests.e2e.conftest import login, role_pages, screenshot

pytestmark = pytest.mark.e2e

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
  }
  return problems;
}"""

CHARTS_DRAWN = (
    "() => [...document.querySelectorAll('[data-figure]')]"
    ".every(e => e.classList.contains('js-plotly-plot'))"
)


@pytest.mark.parametrize("width", [1280, 1440])
@pytest.mark.parametrize("login_name", [name for name, *_ in DEMO_LOGINS])
def test_every_page_of_every_role_fits_its_width(login_name, width, demo, page):
    username, password, role, _ = next(d for d in DEMO_LOGINS if d[0] == login_name)
    page.set_viewport_size({"width": width, "height": 900})
    login(page, username, password)
    problems = {}
    for path in role_pages(page, role):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        page.wait_for_function(CHARTS_DRAWN)
        found = page.evaluate(OVERFLOWS)
        if found:
            problems[path] = found[:4]
            screenshot(page, f"layout-{login_name}-{width}-{path.strip('/').replace('/', '-')}")
    assert problems == {}
