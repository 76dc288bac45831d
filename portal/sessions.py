"""The session engine (settings.SESSION_ENGINE): Django's database sessions, their row read
by every page in one prepared statement."""

from django.contrib.sessions.backends import db
from django.db import connections, router
from django.utils import timezone

from portal.bulk import statement_cursor


class SessionStore(db.SessionStore):
    """Django's database session store, its row read as Django reads it (the session of
    that key not yet expired, else none: the key is dropped) by one statement prepared on
    PostgreSQL (portal.bulk.statement_cursor): the ORM built and compiled the query at every
    page."""

    def load(self):
        using = router.db_for_read(self.model)
        connection = connections[using]
        quote, field = connection.ops.quote_name, self.model._meta.get_field
        sql = (
            f"SELECT {quote(field('session_data').column)} "  # noqa: S608 (names from the model)
            f"FROM {quote(self.model._meta.db_table)} "
            f"WHERE {quote(field('session_key').column)} = %s "
            f"AND {quote(field('expire_date').column)} > %s"
        )
        # Sessions expire on the real clock, as Django's own read has them.
        now = connection.ops.adapt_datetimefield_value(timezone.now())  # noqa: TID251
        with statement_cursor(using) as cursor:
            cursor.execute(sql, [self.session_key, now])
            row = cursor.fetchone()
        if row is None:
            self._session_key = None
            return {}
        return self.decode(row[0])
