"""The README's commands, run as a new user runs them: manage.py in a clean environment.

Subprocesses, so that settings are read afresh from nothing but what each test gives.
"""

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = "from django.conf import settings; print(settings.DATA_DIR); print(settings.SECRET_KEY)"


def manage(*args, **env):
    """manage.py with only PATH, HOME and `env`: no SECRET_KEY, DEBUG or data dir unless given."""
    environment = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True)


def test_a_command_runs_without_a_secret_key_and_keeps_the_one_it_made(tmp_path):
    # Regression: `manage.py import_rollouts --help` ended in "SECRET_KEY is required when DEBUG is off".
    done = manage("import_rollouts", "--help", GAGAR_DATA_DIR=str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "--append" in done.stdout
    kept = tmp_path / "secret_key"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and len(kept.read_text()) >= 50
    again = manage("shell", "-v", "0", "-c", PRINT_SETTINGS, GAGAR_DATA_DIR=str(tmp_path))
    assert again.stdout.splitlines() == [str(tmp_path), kept.read_text().strip()]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".secret_key")]


def test_the_production_profile_still_requires_a_secret_key(tmp_path):
    done = manage("check", GAGAR_DATA_DIR=str(tmp_path), GAGAR_PROFILE="production", ALLOWED_HOSTS="x.example")
    assert done.returncode != 0
    assert "SECRET_KEY is required in the production profile" in done.stderr
    assert not (tmp_path / "secret_key").exists()


def test_a_given_secret_key_wins_and_nothing_is_written(tmp_path):
    done = manage("shell", "-v", "0", "-c", PRINT_SETTINGS, GAGAR_DATA_DIR=str(tmp_path), SECRET_KEY="given")
    assert done.stdout.splitlines()[1] == "given"
    assert not (tmp_path / "secret_key").exists()


def demo_env() -> dict[str, str]:
    """The variables `make demo` sets, from its dry run, and those scripts/demo.sh exports."""
    line = next(x for x in subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                                          check=True).stdout.splitlines() if "scripts/demo.sh" in x)
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words[:words.index("bash")])
    for line in (ROOT / "scripts" / "demo.sh").read_text().splitlines():
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            env[name] = subprocess.run(["bash", "-c", f"echo {value}"], env=env | {"PWD": str(ROOT)},
                                       capture_output=True, text=True, check=True).stdout.strip()
    return env


def test_the_readme_commands_act_on_the_instance_the_demo_serves():
    # Regression: with DEBUG=1 alone data went to ./var while the demo served ./var/demo.
    # A SECRET_KEY is given so that the test writes nothing into the checkout's ./var.
    env = demo_env()
    assert env.get("DEBUG") == "1" and "GAGAR_DATA_DIR" not in env
    env.pop("PY", None)
    demo = manage("shell", "-v", "0", "-c", PRINT_SETTINGS, SECRET_KEY="k", **env)
    readme = manage("shell", "-v", "0", "-c", PRINT_SETTINGS, SECRET_KEY="k")
    assert demo.returncode == readme.returncode == 0, demo.stderr + readme.stderr
    assert demo.stdout.splitlines()[0] == readme.stdout.splitlines()[0] == str(ROOT / "var")


def test_each_kind_of_background_work_reads_its_own_settings_and_refuses_bad_ones(tmp_path):
    shown = "from django.conf import settings as s; print(s.GAGAR_EXPORT_LEASE, s.GAGAR_GRADING_LEASE)"
    done = manage("shell", "-v", "0", "-c", shown, GAGAR_DATA_DIR=str(tmp_path), GAGAR_EXPORT_LEASE="90")
    assert done.stdout.split() == ["90.0", "30.0"], done.stderr
    for value, reason in (("soon", "'soon': not a number"), ("0", "must be above 0")):
        done = manage("check", GAGAR_DATA_DIR=str(tmp_path), GAGAR_RENDER_TIME_LIMIT=value)
        assert done.returncode != 0 and "ImproperlyConfigured: GAGAR_RENDER_TIME_LIMIT=" in done.stderr
        assert reason in done.stderr


PRINT_CODEBASES = "from django.conf import settings; print(settings.GAGAR_CODEBASES)"


def test_every_process_of_an_instance_reads_its_instance_file_whatever_shell_launched_it(tmp_path):
    # Regression: only the demo's shell exported GAGAR_CODEBASES, so grading from another shell
    # skipped the execution evidence without a word.
    (tmp_path / "instance.env").write_text("# the demo's codebase store\nGAGAR_CODEBASES=/srv/store\n")
    plain = manage("shell", "-v", "0", "-c", PRINT_CODEBASES, GAGAR_DATA_DIR=str(tmp_path))
    assert plain.returncode == 0 and plain.stdout.strip() == "/srv/store", plain.stderr
    given = manage("shell", "-v", "0", "-c", PRINT_CODEBASES, GAGAR_DATA_DIR=str(tmp_path),
                   GAGAR_CODEBASES="/elsewhere")
    assert given.stdout.strip() == "/elsewhere"  # the environment wins


@pytest.mark.parametrize("line, problem", [
    ("GAGAR_CODEBASES", "not NAME=value"),
    ("SECRET_KEY=x", "'SECRET_KEY' is not a GAGAR_ setting"),
    ("GAGAR_PROFILE=production", "GAGAR_PROFILE is read before this file: set it in the environment"),
])
def test_a_bad_line_of_the_instance_file_stops_start_up_naming_the_file_and_line(tmp_path, line, problem):
    (tmp_path / "instance.env").write_text(f"GAGAR_SANDBOX=bwrap\n{line}\n")
    done = manage("check", GAGAR_DATA_DIR=str(tmp_path))
    assert done.returncode != 0 and f"{tmp_path / 'instance.env'}:2: {problem}" in done.stderr, done.stderr
