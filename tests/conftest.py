"""Django for every test but the pure core's.

tests/grading tests `grading/`, which never imports Django (docs/architecture.md): a run that
selects only tests under it sets up no Django and needs no settings or environment.
Any other selection sets Django up here, from `webapp.settings` unless --ds or
$DJANGO_SETTINGS_MODULE names other settings, and registers the shared fixtures of
tests/django_fixtures.py. The settings are not in the pytest configuration because
pytest-django would then load them for every run, the core's included; it finishes
the setup (test databases, blocking unmarked database access) in its own
pytest_configure, which runs after this one.

Named on the command line, a folder's conftest.py is imported before this hook
runs, so the conftests below this one import the app (models, webapp modules)
inside their fixtures, never at the top.
"""

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests run beside worker fleets and browsers on two cores: a wall-clock deadline per
# example measures the machine's load, not the code (speed is bench/'s to assert).
hypothesis_settings.register_profile("unhurried", deadline=None)
hypothesis_settings.load_profile("unhurried")

# Tests that need no Django: the pure core's, and the sample generator's.
CORE_TESTS = tuple(Path(__file__).resolve().parent / name for name in ("grading", "sample"))


def pytest_configure(config):
    # pytest configures for --help too, which must work without settings.
    if config.option.help or all(_in_core(config.invocation_params.dir, arg) for arg in config.args):
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as error:  # a missing SECRET_KEY, say: one line, not a traceback
        raise pytest.UsageError(f"the Django tests cannot load {os.environ['DJANGO_SETTINGS_MODULE']}: "
                                f"{error}") from error
    config.pluginmanager.import_plugin("tests.django_fixtures")


def _in_core(invocation_dir: Path, arg: str) -> bool:
    """Whether a selected path (`file.py::test` node ids too) lies inside the core tests."""
    path = (invocation_dir / arg.split("::")[0]).resolve()
    return any(path.is_relative_to(core) for core in CORE_TESTS)


@pytest.fixture(scope="session")
def sandbox_python():
    """A virtual environment's python with pytest, in a folder the sandbox may read: built once."""
    from tests import evidencedata

    root = evidencedata.sandbox_root()
    yield evidencedata.python_with_pytest(root)
    shutil.rmtree(root)
