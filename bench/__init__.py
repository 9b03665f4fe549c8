"""What the benchmarks share."""


def fresh_database(admin_url: str, name: str) -> str:
    """Drop and create the PostgreSQL database `name` on the server of `admin_url`; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + f"/{name}"
