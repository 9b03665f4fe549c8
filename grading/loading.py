"""Classes named in configuration: a registered name, or a `module:Class` path.

Graders and backends are registered by dotted path and imported only when loaded, so
`import grading` needs none of the optional extras. `resolve` checks a name without
importing anything (a profile file is checked when read); `load_object` imports it.
Callers turn a LoadError into their own error (GraderError, ProfileError).
"""

import importlib
from collections.abc import Mapping


class LoadError(Exception):
    """A name that resolves to nothing: unknown, or its module has no such class."""


class ImportFailed(LoadError):
    """The module a name points to could not be imported (often a missing extra)."""


def resolve(name: str, registry: Mapping[str, str], *, what: str) -> tuple[str, str]:
    """(module, attribute) of a registered name or a `module:Class` path; imports nothing.

    >>> resolve("json", {"json": "json:JSONDecoder"}, what="decoder")
    ('json', 'JSONDecoder')
    >>> resolve("yaml", {"json": "json:JSONDecoder"}, what="decoder")
    Traceback (most recent call last):
    ...
    grading.loading.LoadError: unknown decoder 'yaml' (known: json, or module:Class)
    """
    module, _, attribute = registry.get(name, name).partition(":")
    if not (module and attribute):
        raise LoadError(f"unknown {what} {name!r} (known: {', '.join(sorted(registry))}, or module:Class)")
    return module, attribute


def load_object(name: str, registry: Mapping[str, str], *, what: str):
    """What `name` resolves to, its module imported now. `what` names it in errors."""
    module_name, attribute = resolve(name, registry, what=what)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportFailed(f"cannot load {what} {name!r}: {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError as error:
        raise LoadError(f"cannot load {what} {name!r}: {error}") from error
