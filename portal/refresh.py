"""Pages whose figures move while they are open (the tenant's home, the usage page: kpis.md
section 0, a tenant sees the request it just made within a minute): they show how far their
window is measured (templates/portal/_measured.html) and ask for themselves again at most
every 30 s while the tab is visible (static/js/refresh.js, htmx), sending the measurement
they show: its time and where the published cut stands in metering's log (two cuts may share
a second). The answer is a 204, which htmx leaves alone, while it has not moved, else the
page, whose figures htmx swaps in."""

from django.http import HttpResponse

from portal.periods import Window
from portal.pipeline import cut_read

SHOWN = "X-Measured"  # the header a refresh sends: the measurement the page shows


def refresh_stamp(window: Window) -> str:
    """The measurement a page of `window` shows, as its refresh sends it back."""
    cut = cut_read()
    return f"{window.to.isoformat()} {cut.position if cut else 0}"


def refresh_unchanged(request, *, window: Window) -> HttpResponse | None:
    """A 204 for a refresh of a page whose window is measured where it was, else None."""
    if request.headers.get("HX-Request") and request.headers.get(SHOWN) == refresh_stamp(window):
        return HttpResponse(status=204)
    return None
