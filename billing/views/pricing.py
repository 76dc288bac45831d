"""The price book page."""

from django.shortcuts import render

from billing.selectors.pricing import price_book_get
from portal import clock
from portal.decorators import role_required
from portal.models import Role


@role_required(Role.OPERATOR, Role.FINANCE)
def price_book(request):
    """List prices, contracts and promotions: what is in force now, scheduled, superseded."""
    return render(
        request,
        "billing/pricing/prices.html",
        {
            "title": "Price book and contracts",
            "book": price_book_get(at=clock.now(), user=request.user),
        },
    )
