"""What the benchmarks share."""


def fresh_database(admin_url: str, name: str) -> str:
    """Drop and create the PostgreSQL database `name` on the server of `admin_url`; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def migrated_django() -> None:
    """Set Django up on the database the environment names (production settings, the test
    client's host) and migrate it."""
    import os

    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["DEBUG"] = ""
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
