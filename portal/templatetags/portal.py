from django import template

register = template.Library()


@register.filter
def tokens(value) -> str:
    """12.4 M / 3.1 B style, exact figure in the title attribute and exports."""
    if value is None:
        return "—"
    value = float(value)
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f} {suffix}"
    return f"{value:.0f}"


@register.filter
def ms(value) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"
