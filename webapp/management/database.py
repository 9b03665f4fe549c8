"""Database errors on the command line: one line and exit status 1, not a traceback."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError
from django.db import DatabaseError, OperationalError, ProgrammingError


@contextmanager
def database_errors_in_one_line() -> Iterator[None]:
    """Turns a DatabaseError raised inside into a CommandError of one line: an unreachable
    server, a database not migrated, a value the database refuses."""
    try:
        yield
    except DatabaseError as error:
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        hint = "; check DATABASE_URL, and that `manage.py migrate` has run" if isinstance(
            error, OperationalError | ProgrammingError) else ""
        raise CommandError(f"database error: {first}{hint}") from None
