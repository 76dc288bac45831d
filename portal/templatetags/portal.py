import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import partial
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.template.base import FilterExpression
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from portal.access import user_role
from portal.formatting import number_text, percent_text, recorded_value, tokens_short
from portal.kept import kept
from portal.money import round_money, round_money_whole
from portal.periods import PRESETS, picker_keys
from portal.shell import page_opens

register = template.Library()


@register.filter
def tokens(value) -> str:
    """12.4 M / 3.1 B style, exact figure in the title attribute and exports."""
    return tokens_short(value)


@register.filter
def ms(value) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _decimal(value) -> Decimal | None:
    if value is None or value == "":
        return None
    if isinstance(value, Fraction):
        return Decimal(value.numerator) / Decimal(value.denominator)
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return None


def _money_text(*, value, rounding: Callable[..., Decimal], spec: str) -> str:
    """`value` rounded by `rounding` in the factory's currency, formatted by `spec`; never a
    negative zero ("-0.00", "-0")."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    rounded = rounding(amount=amount, currency=settings.FACTORY_CURRENCY)
    return format(abs(rounded) if rounded == 0 else rounded, spec)


@register.filter
def money(value) -> str:
    """Money with thousands separators and two decimals (cents): -1,234.50. Rounded half-up
    for display only; stored amounts are already rounded per line."""
    return _money_text(value=value, rounding=round_money, spec=",.2f")


@register.filter
def money_whole(value) -> str:
    """Money in whole units for summaries (1,234,568): rounded to the cent first, as every
    amount is, then to the unit half-up, so a page in units agrees with one in cents."""
    return _money_text(value=value, rounding=round_money_whole, spec=",")


@register.filter
def money_abs(value) -> str:
    amount = _decimal(value)
    return "—" if amount is None else money(abs(amount))


@register.filter
def money_rate(value) -> str:
    """A unit price per million tokens: at least two decimals, more only when it has them
    (0.88, 0.175, 2.19)."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    text = format(amount.normalize(), "f")
    whole, _, fraction = text.partition(".")
    return f"{int(whole):,}.{fraction.ljust(2, '0')}"


# Where a long name may break: after a separator of a URL, a slug or a path.
# A run of separators, except one between two digits: a number (0.97), a time (19:00) or a
# date (2026-12-05) never breaks inside.
_SEPARATORS = re.compile(r"((?<!\d)[/.?&=_@:-]+|[/.?&=_@:-]+(?!\d))")


@register.filter
def breakable(value) -> str:
    """Text whose long names (a URL, deepseek-r1@b200-a, reconciliation_drift) may break
    after their separators rather than push the page wider: escaped, with a <wbr> after
    each run of them; words break at spaces as ever."""
    if value is None:
        return ""
    parts = _SEPARATORS.split(str(value))  # text, separators, text, …
    shown = "".join(
        f"{escape(part)}<wbr>" if n % 2 else str(escape(part)) for n, part in enumerate(parts)
    )
    return mark_safe(shown)  # noqa: S308 (every part escaped)


@register.filter
def opens_for(link, user) -> bool:
    """Whether a portal link opens for the user's role (portal.shell.page_opens): a link
    or a button is shown only to a role it does something for."""
    return bool(link) and page_opens(link, user_role(user))


@register.filter
def get_item(mapping, key):
    """A mapping's value by a key held in a variable (a bucket of aged receivables)."""
    return mapping.get(key) if mapping else None


@register.filter
def pct_plain(value) -> str:
    """A percentage held as a number of percent (10 → 10%, 12.5 → 12.5%)."""
    amount = _decimal(value)
    if amount is None:
        return "—"
    return f"{format(amount.normalize(), 'f')}%"


@register.filter
def ratio_pct(value, digits: int = 1) -> str:
    """A ratio as a percentage with one decimal: 0.427 → 42.7% (portal.formatting)."""
    return percent_text(_decimal(value), int(digits))


@register.filter
def key_label(value) -> str:
    """An identifier shown as words: no_contract → No contract."""
    return str(value).replace("_", " ").capitalize()


@register.inclusion_tag("portal/_period.html", takes_context=True)
def period_picker(context):
    """The period picker of a page's header: presets, a month, a quarter or custom bounds,
    kept in the URL with the page's other parameters, and the window actually measured."""
    window, request = context["window"], context["request"]
    kept = [(k, v) for k, v in request.GET.items() if k not in ("period", "from", "to", "page")]
    return {
        "window": window,
        "presets": PRESETS,
        "choices": picker_keys(now=window.now, since=window.data_from),
        "kept": kept,
        "query": urlencode(kept),
        "request": request,
        "refresh": context.get("refresh"),  # the figures a running window refreshes
        "refresh_stamp": context.get("refresh_stamp"),
    }


SORTED = {"ascending": "▲", "descending": "▼"}


@register.simple_tag(takes_context=True)
def sort_header(context, label: str, column: str, css: str = "", title: str = ""):
    """A column header that sorts its list (`?ordering=`: the list's FilterSet, or
    `rows_ordered` for rows made in Python): by `column`, or descending when it already
    sorts ascending by it; the other filters kept, back to the first page. `aria-sort` and
    an arrow say the order in force (the page's `ordering_default` without `?ordering=`)."""
    query = context["request"].GET.copy()
    current = query.get("ordering") or context.get("ordering_default", "")
    state = {column: "ascending", f"-{column}": "descending"}.get(current, "none")
    query.pop("page", None)
    query["ordering"] = f"-{column}" if state == "ascending" else column
    arrow = (
        format_html('<span aria-hidden="true">{}</span>', SORTED[state]) if state in SORTED else ""
    )
    return format_html(
        '<th{}{} aria-sort="{}"><a class="sort" href="?{}">{}{}</a></th>',
        format_html(' class="{}"', css) if css else "",
        format_html(' title="{}"', title) if title else "",
        state,
        query.urlencode(),
        label,
        arrow,
    )


@register.filter
def audit_changes(entry) -> list[tuple[str, str | None, str | None]]:
    """An audit entry as (field, before, after) for each field it changed, values in words.
    A creation has no before (None) and lists the fields it set; a deletion has no after
    (None) and lists the fields it held: neither lists a field that was empty."""
    before, after = entry.before or {}, entry.after or {}
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [("", audit_value(before or None), audit_value(after or None))]
    names = getattr(entry, "tenant_names", {})  # portal.audit.audit_tenants_named

    def shown(field: str, value) -> str:
        if field == "tenant" and value in names:
            return names[value]
        return audit_value(value)

    if not (before and after):
        held = before or after
        return [
            (field, *((None, text) if after else (text, None)))
            for field, value in held.items()
            if (text := shown(field, value)) != "—"
        ]
    fields = [*before, *(key for key in after if key not in before)]
    return [
        (field, shown(field, before.get(field)), shown(field, after.get(field)))
        for field in fields
        if before.get(field) != after.get(field)
    ]


def audit_value(value) -> str:
    """A value of an audit entry as people read it (`recorded_value`), numbers grouped
    without trailing zeros, at most four decimals (60000.0000 → 60,000; 0.5502046290882828…
    → 0.5502); the exact value stays in the record (GET /api/v1/audit)."""
    return recorded_value(value, number=partial(number_text, trailing_zeros=False))


@register.filter
def event_value(value) -> str:
    """A value of a notification's data as a plain-text email shows it (`recorded_value`),
    numbers grouped as the pages group them (an amount keeps its cents: 1,193.60)."""
    return recorded_value(value)


@register.filter
def audit_object(entry) -> str:
    """What an audit entry changed, by the name people know it by (its slug, name, number or
    title, from the record), else by its type and id: "lever speculative-decoding"."""
    kind = entry.object_type.replace("_", " ")
    snapshot = entry.after if isinstance(entry.after, dict) else entry.before
    if isinstance(snapshot, dict):
        for key in ("slug", "number", "name", "title", "username"):
            if snapshot.get(key):
                return f"{kind} {snapshot[key]}"
    return (
        f"{kind} #{entry.object_id}" if entry.object_id.isdigit() else f"{kind} {entry.object_id}"
    )


class KeptNode(template.Node):
    """A fragment kept (portal.kept) under its name and a stamp (`kept_fragment`)."""

    def __init__(self, nodelist: template.NodeList, name: str, stamp: FilterExpression):
        self.nodelist, self.name, self.stamp = nodelist, name, stamp

    def render(self, context) -> str:
        stamp = self.stamp.resolve(context)
        if stamp is None:
            return self.nodelist.render(context)
        # NodeList.render's text is safe (SafeString), and is kept as such.
        return kept(("portal.fragment", self.name, stamp), lambda: self.nodelist.render(context))


@register.tag
def kept_fragment(parser, token) -> KeptNode:
    """`{% kept_fragment "name" stamp %}…{% endkept_fragment %}`: the fragment rendered once
    and kept in the shared cache (portal.kept) under "name" and `stamp`, a value that names
    exactly everything the fragment shows (the data, and any name or setting it writes):
    a change to it is a new key. A None stamp renders it every time. The fragment must not
    show what depends on the reader (its role, its CSRF token) unless the stamp names it."""
    bits = token.split_contents()
    if len(bits) != 3:
        raise template.TemplateSyntaxError(f'{bits[0]} takes "name" and a stamp')
    nodelist = parser.parse(("endkept_fragment",))
    parser.delete_first_token()
    name = bits[1].strip("\"'")
    return KeptNode(nodelist, name, parser.compile_filter(bits[2]))
