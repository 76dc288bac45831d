"""Filters of the portal's log (settings.LOGGING)."""

import logging


class RefusalWithoutTraceback(logging.Filter):
    """A refused request (403: a role that may not open a page, a token without the scope)
    is an answer, not a fault: Django's request log keeps its one line ("Forbidden
    (Permission denied): /metering/") without the exception's traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
