"""Pages whose figures move while they are open (the tenant's home, the usage page: kpis.md
section 0, a tenant sees the request it just made within a minute): they show how far their
window is measured (templates/portal/_measured.html) and ask for themselves again at most
every 30 s while the tab is visible (static/js/refresh.js, htmx), sending the measurement
they show; the answer is a 204, which htmx leaves alone, while it has not moved, else the
page, whose figures htmx swaps in."""

from django.http import HttpResponse

from portal.periods import Window

SHOWN = "X-Measured-Until"  # the header a refresh sends: the `to` the page shows


def refresh_unchanged(request, *, window: Window) -> HttpResponse | None:
    """A 204 for a refresh of a page whose window is measured where it was, else None."""
    if request.headers.get("HX-Request") and request.headers.get(SHOWN) == window.to.isoformat():
        return HttpResponse(status=204)
    return None
