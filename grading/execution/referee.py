"""The referee: a pytest plugin that records what each test did, for the evidence runner
to read instead of pytest's printed summary (docs/execution.md, "The referee").

It runs inside the sandbox, in the task's own interpreter: nothing on the host imports
it (`reports.seat_referee` copies its text into a run's copy, in a folder of a random
name, and the test script names it in PYTEST_PLUGINS). So: the standard library and
pytest only, and the syntax of Python 3.6, which old task environments still run.

It writes one JSON object a line to `results.jsonl` beside itself:

- `{"event": "loaded"}` as pytest registers it (before any conftest or tested module);
- `{"event": "phase", "test": id, "when": "setup"|"call"|"teardown"|"collect",
  "outcome": "passed"|"failed"|"skipped"|"xfailed"|"xpassed", "forged": why}` for each
  call, and each setup, teardown or collection that did not pass; `outcome` is what the
  test itself did (an exception raised, outside an expected failure, is `failed` whatever
  the report says), `forged` is there when pytest's report said otherwise;
- `{"event": "hook", "hook": name, "plugin": name, "file": path}` for each hook
  implementation from a file in the copy (`file` relative to it), or from no file at
  all (`file` null, `origin` what its code names): the host knows which files the
  candidate wrote;
- `{"event": "tampering", "what": text}` for each function or method of pytest or pluggy
  replaced or added after it loaded by code that is not theirs, and each hook caller that
  is not pluggy's;
- `{"event": "finished", "exitstatus": n}` once the session has ended.

Code in the tests' process can do anything this can, this file's record included: what
it records is evidence, not proof (docs/sandbox.md, "Test machinery").
"""

import json
import os
import sys
import types

import pytest

_FOLDER = os.path.dirname(os.path.realpath(__file__))
_WORKDIR = os.path.dirname(_FOLDER)
_RESULTS = os.path.join(_FOLDER, "results.jsonl")
_RUNNER_PACKAGES = ("pytest", "_pytest", "pluggy")
_METHODS = (types.FunctionType, classmethod, staticmethod, property)


def _write(**record):
    # Opened per record, and each a single write: what was written stands however the
    # process ends (os._exit, a kill at a limit).
    with open(_RESULTS, "a") as results:
        results.write(json.dumps(record, sort_keys=True) + "\n")


def _forget_me():
    """Take this plugin out of the environment that tests hand to the processes they
    start: a pytest run inside a test would otherwise load it and write its own tests here."""
    for variable, separator, mine in (("PYTEST_PLUGINS", ",", {__name__}),
                                      ("PYTHONPATH", os.pathsep, {_FOLDER, os.path.dirname(__file__)})):
        kept = [part for part in os.environ.get(variable, "").split(separator)
                if part.strip() and part.strip() not in mine]
        if kept:
            os.environ[variable] = separator.join(kept)
        else:
            os.environ.pop(variable, None)


def _runner_functions():
    """{(module, name): object}: the functions of the pytest and pluggy modules loaded now,
    and the methods and properties of the classes they define (named `Class.method`)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or name.split(".")[0] not in _RUNNER_PACKAGES:
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType):
                found[name, attribute] = value
            elif isinstance(value, type) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    if isinstance(member, _METHODS):
                        found[name, value.__qualname__ + "." + key] = member
    return found


_RUNNER_FOLDERS = tuple(os.path.dirname(os.path.realpath(sys.modules[name].__file__)) + os.sep
                        for name in _RUNNER_PACKAGES if name in sys.modules)
_BEFORE = {}  # pytest's and pluggy's functions as they were when pytest registered this plugin


def pytest_plugin_registered(plugin, manager):
    # Started by its own registration, not by its import: imported by anything else (the
    # host's checks import every module of grading/), it writes nothing.
    if plugin is sys.modules[__name__] and not _BEFORE:
        _forget_me()
        _write(event="loaded")
        # Taken before any conftest or tested module is imported: what replaces them later
        # is not pytest's.
        _BEFORE.update(_runner_functions())


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.excinfo is not None:
        return
    report = outcome.get_result()
    excinfo = call.excinfo
    skipped = excinfo is not None and excinfo.errisinstance(pytest.skip.Exception)
    raised = excinfo is not None and not skipped
    expected = hasattr(report, "wasxfail") and (not raised or excinfo.errisinstance(pytest.xfail.Exception)
                                                or item.get_closest_marker("xfail") is not None)
    record = {"event": "phase", "test": report.nodeid, "when": call.when, "outcome": report.outcome}
    if raised and not expected and report.outcome != "failed":
        record["outcome"] = "failed"
        record["forged"] = f"reported {report.outcome} where it raised {excinfo.typename}"
    elif skipped and report.outcome == "passed":
        record["outcome"] = "skipped"
        record["forged"] = "reported passed where it was skipped"
    elif expected and report.outcome != "failed":
        record["outcome"] = "xfailed" if report.outcome == "skipped" else "xpassed"
    if call.when == "call" or record["outcome"] != "passed":
        _write(**record)


def pytest_collectreport(report):
    if report.failed:
        _write(event="phase", test=report.nodeid, when="collect", outcome="failed")


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    _audit(session.config)
    _write(event="finished", exitstatus=int(session.exitstatus))


def _audit(config):
    now = _runner_functions()
    for key in sorted(set(_BEFORE) | set(now)):
        if now.get(key) is not _BEFORE.get(key) and not _pytests_own(now.get(key)):
            change = "replaced" if key in _BEFORE else "added"
            _write(event="tampering", what=f"{key[0]}.{key[1]} was {change} while the tests ran")
    hooks = config.pluginmanager.hook
    for hook, caller in sorted(vars(hooks).items()):
        if not hook.startswith("pytest_"):
            continue
        if type(caller).__module__.split(".")[0] != "pluggy":
            _write(event="tampering", what=f"the hook {hook} was replaced")
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin is sys.modules[__name__]:
                continue
            origin = _code_file(impl.function) or repr(impl.function)
            if not os.path.isfile(origin):
                _write(event="hook", hook=hook, plugin=str(impl.plugin_name), file=None, origin=origin)
                continue
            path = os.path.realpath(origin)
            if path.startswith(_WORKDIR + os.sep):
                _write(event="hook", hook=hook, plugin=str(impl.plugin_name),
                       file=os.path.relpath(path, _WORKDIR))


def _pytests_own(member):
    """Whether `member` (None: gone) is code of pytest's or pluggy's own files: pytest's own
    plugins replace and add methods as they configure (legacypath)."""
    path = _code_file(member)
    return path is not None and os.path.realpath(path).startswith(_RUNNER_FOLDERS)


def _code_file(member):
    function = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
    code = getattr(function, "__code__", None)
    return code.co_filename if code is not None else None
