"""portal.wsgi with the portal's clock stood still at BENCH_NOW (an RFC 3339 instant), for
the budget reads of goal 14: a budget reads "this month" and "today" by the clock, and the
dataset's usage is in config.MONTH_START's month, so on the real calendar its sums find no
rows. Production settings otherwise (they refuse PORTAL_NOW, a test clock DEBUG alone
honours); each gunicorn worker imports this module and sets its own clock."""

import os

from portal import clock
from portal.wsgi import application

clock.clock_set(clock.parse_instant(os.environ["BENCH_NOW"]))

__all__ = ["application"]
