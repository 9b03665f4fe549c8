"""The tracer: what the functions that the task's reference fix changes make of each call, while a
run's tests or the issue's examples run (docs/execution.md, "Probes").

It runs inside the sandbox, in the task's own interpreter: nothing on the host imports it but
to check it (`trace.seat_tracer` copies its text into a run's copy, in a folder of a random
name). So: the standard library only, and the syntax of Python 3.6. It starts as a pytest
plugin (PYTEST_PLUGINS, before any conftest or tested module: `trace.tracer_env`), or by
`start()` (the examples' driver calls it in each example's process).

It reads `targets.json` beside itself, `[{"name", "path", "qualname", "modules"}]`, and as a
module whose file is a target's `path` (or whose name is one of its `modules`) is imported,
puts a recording wrapper in place of each of its targets. It writes `calls.jsonl` beside
itself, one JSON object a line:

- `{"event": "loaded"}` as it starts;
- `{"event": "call", "target": name, "args": "x=20, low=10, high=0", "outcome": "returns 10"
  or "raises ValueError"}` for each distinct (arguments, outcome) of a target, at most
  MAX_CALLS of each, from at most MAX_OBSERVED calls (a hot function is not slowed down for
  ever); the arguments as they were before the call, each value's repr bounded;
- `{"event": "missing", "target": name}` when a target's module loaded without it (or with
  something that cannot be wrapped in its place).

Code in the traced process can do anything this can, this file's record included: what it
records is evidence, not proof (docs/sandbox.md, "Test machinery").
"""

import functools
import inspect
import json
import os
import re
import sys
import threading
import types

_FOLDER = os.path.dirname(os.path.realpath(__file__))
_WORKDIR = os.path.dirname(_FOLDER)
_CALLS = os.path.join(_FOLDER, "calls.jsonl")
_TARGETS = os.path.join(_FOLDER, "targets.json")
MAX_CALLS = 100
MAX_OBSERVED = 10000
MAX_REPR = 300
MAX_ITEMS = 20
MAX_DEPTH = 3
# An object's default repr names its address, which differs between any two runs.
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
_local = threading.local()
_started = []


def _write(**record):
    # Opened per record, and each a single write: what was written stands however the
    # process ends (os._exit, a kill at a limit).
    try:
        with open(_CALLS, "a") as calls:
            calls.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError:
        pass  # the record taken away by the traced code: what it runs goes on as it would untraced


def start():
    """Trace the targets in this process from now on: the modules already imported at once,
    the others as they are imported."""
    if _started:
        return
    _started.append(True)
    with open(_TARGETS) as targets:
        targets = json.load(targets)
    _write(event="loaded")
    finder = _Finder(targets)
    for module in list(sys.modules.values()):
        if isinstance(module, types.ModuleType):
            found = finder.targets_of(module.__name__, getattr(module, "__file__", None))
            if found:
                _wrap_module(module, found)
    sys.meta_path.insert(0, finder)


def pytest_plugin_registered(plugin, manager):
    # Started by its own registration, not by its import (the host imports it to check it).
    if plugin is sys.modules[__name__]:
        _forget_me()
        start()


def _forget_me():
    """Out of the environment that tests hand to the processes they start: the run's record
    is the tests' process's, as the referee's is."""
    for variable, separator, mine in (("PYTEST_PLUGINS", ",", {__name__}),
                                      ("PYTHONPATH", os.pathsep, {_FOLDER, os.path.dirname(__file__)})):
        kept = [part for part in os.environ.get(variable, "").split(separator)
                if part.strip() and part.strip() not in mine]
        if kept:
            os.environ[variable] = separator.join(kept)
        else:
            os.environ.pop(variable, None)


class _Finder:
    """Finds nothing itself: asks the finders after it, and hands out a loader that wraps the
    targets once a target's module has run."""

    def __init__(self, targets):
        self.targets = targets
        # The import system asks every finder about every import: only names that could be
        # a target's module are passed on (a module's name ends with its file's stem).
        self.stems = {module.rpartition(".")[2] for target in targets for module in target["modules"]}

    def targets_of(self, fullname, origin):
        origin = os.path.realpath(origin) if origin else None
        return [target for target in self.targets if fullname in target["modules"]
                or origin == os.path.realpath(os.path.join(_WORKDIR, target["path"]))]

    def find_spec(self, fullname, path, target=None):
        if fullname.rpartition(".")[2] not in self.stems or getattr(_local, "finding", False):
            return None
        _local.finding = True
        try:
            spec = None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is not self and find is not None:
                    spec = find(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            _local.finding = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return None
        found = self.targets_of(fullname, spec.origin)
        if found:
            spec.loader = _Loader(spec.loader, found)
        return spec


class _Loader:
    def __init__(self, loader, targets):
        self._loader = loader
        self._targets = targets

    def __getattr__(self, name):  # get_source, get_data, is_package...: the loader's own
        return getattr(self._loader, name)

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        self._loader.exec_module(module)
        _wrap_module(module, self._targets)


def _wrap_module(module, targets):
    for target in targets:
        *outer, last = target["qualname"].split(".")
        holder = module
        for part in outer:
            holder = vars(holder).get(part)
            if not isinstance(holder, type):
                break
        member = vars(holder).get(last) if isinstance(holder, (type, types.ModuleType)) else None
        wrapped = _wrapped(member, target["name"], in_class=isinstance(holder, type))
        if wrapped is None:
            _write(event="missing", target=target["name"])
        else:
            setattr(holder, last, wrapped)


def _wrapped(member, name, in_class):
    """`member` with its calls recorded, of the same kind (a method stays a method); None
    when it is not something a wrapper can stand in for."""
    if isinstance(member, types.FunctionType):
        return _tracing(member, name)
    if isinstance(member, staticmethod):
        return staticmethod(_tracing(member.__func__, name))
    if isinstance(member, classmethod):
        return classmethod(_tracing(member.__func__, name))
    if isinstance(member, property) and member.fget is not None:
        return property(_tracing(member.fget, name), member.fset, member.fdel, member.__doc__)
    if not in_class and callable(member) and not isinstance(member, type):
        return _tracing(member, name)  # a module's decorated function: an lru_cache, a partial
    return None


def _tracing(function, name):
    seen = set()
    observed = [0]
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(function)
    def traced(*args, **kwargs):
        if getattr(_local, "busy", False) or observed[0] >= MAX_OBSERVED or len(seen) >= MAX_CALLS:
            return function(*args, **kwargs)
        observed[0] += 1
        call = _quietly(_arguments, signature, args, kwargs)
        try:
            result = function(*args, **kwargs)
        except BaseException as error:
            _record(name, seen, call, "raises " + _type_name(type(error)))
            raise
        _record(name, seen, call, "returns " + _quietly(_repr, result))
        return result

    return traced


def _record(name, seen, call, outcome):
    if (call, outcome) in seen:
        return
    seen.add((call, outcome))
    _write(event="call", target=name, args=call, outcome=outcome)


def _quietly(describe, *values):
    """`describe(*values)`, with the targets' calls it makes left out of the record (a repr
    may call them), and its errors said, not raised: tracing must not change what runs."""
    _local.busy = True
    try:
        return _cut(describe(*values))
    except Exception as error:
        return f"<unrepresentable: {_type_name(type(error))}>"
    finally:
        _local.busy = False


def _arguments(signature, args, kwargs):
    """The arguments as the function's parameters name them, as passed (no defaults filled
    in), so that `f(1, b=2)` and `f(1, 2)` are one call."""
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            return ", ".join(f"{key}={_repr(value)}" for key, value in bound.arguments.items())
    return ", ".join([_repr(value) for value in args]
                     + [f"{key}={_repr(value)}" for key, value in sorted(kwargs.items())])


def _repr(value, depth=0):
    """A repr that is the same in any two runs of the same behaviour, and bounded: sets sorted
    (their order follows the hash seed), addresses blanked, long things cut."""
    if depth >= MAX_DEPTH:
        return "..."
    kind = type(value)
    if kind in (list, tuple):
        items = [_repr(item, depth + 1) for item in value[:MAX_ITEMS]] + (["..."] if len(value) > MAX_ITEMS else [])
        text = ", ".join(items) + ("," if kind is tuple and len(items) == 1 else "")
        return _cut(("[{}]" if kind is list else "({})").format(text))
    if kind is dict:
        items = [f"{_repr(key, depth + 1)}: {_repr(item, depth + 1)}"
                 for key, item in list(value.items())[:MAX_ITEMS]] + (["..."] if len(value) > MAX_ITEMS else [])
        return _cut("{" + ", ".join(items) + "}")
    if kind in (set, frozenset):
        if len(value) > MAX_ITEMS:
            return f"<{kind.__name__} of {len(value)} items>"
        return "{}({{{}}})".format(kind.__name__, ", ".join(sorted(_repr(item, depth + 1) for item in value)))
    if kind in (str, bytes):
        return repr(value[:MAX_REPR]) + ("..." if len(value) > MAX_REPR else "")
    return _cut(_ADDRESS.sub("0x?", repr(value)))


def _cut(text):
    return text[:MAX_REPR] + "..." if len(text) > MAX_REPR else text


def _type_name(kind):
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "exceptions", "") else module + "." + name
