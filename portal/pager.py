"""The pager of list pages: the page of rows a request asks for with `?page=`, which
templates/portal/_pager.html shows and links through (keeping every other parameter)."""

from django.core.paginator import Page, Paginator

PAGE_SIZE = 50  # rows per page of a list page


def pager_page(request, rows, *, size: int = PAGE_SIZE) -> Page:
    """The page of `rows` that `?page=` asks for: past the end, the last; not a number, the
    first."""
    return Paginator(rows, size).get_page(request.GET.get("page"))
