"""Query parameters read the same way on every page."""

QUERY_INT_MAX = 2**31 - 1  # past any turn, part offset or patch row; what every database takes


def query_int(value, default=0) -> int:
    """An integer from a query parameter, clamped to 0..QUERY_INT_MAX; `default`
    when it is missing or not a number."""
    try:
        return min(max(0, int(value)), QUERY_INT_MAX)
    except (TypeError, ValueError):
        return default
