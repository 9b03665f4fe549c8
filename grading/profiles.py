"""Grader profiles: named grader configurations read from a TOML file.

The file is named by the GAGAR_GRADERS environment variable (see graders.example.toml).
Each `[graders.NAME]` table picks a grader, the Celery queue that runs it and, for an LLM
grader ("agentic" or "hybrid"), its backend, model, sampling, budgets and k (runs per
group against position bias). The
built-in `heuristic` profile needs no file. Errors name the file, the key and the
reason. Loading a profile imports nothing heavy; `build_grader` does, when it is used.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from grading.backends import BACKENDS, Sampling
from grading.graders.base import GRADERS, Grader, load_grader
from grading.loading import LoadError, resolve

ENV_VAR = "GAGAR_GRADERS"
QUEUES = ("cpu", "gpu")
LOCAL_MODEL_BACKENDS = ("transformers", "vllm")
LLM_GRADERS = ("agentic", "hybrid")  # built from the backend, model, sampling and budget keys


class ProfileError(ValueError):
    """A profile file that cannot be used: `file: graders.NAME.key: reason`."""


@dataclass(frozen=True)
class Profile:
    name: str
    grader: str = "agentic"
    backend: str = ""
    model: str = ""
    url: str = ""
    options: Mapping = field(default_factory=dict)
    sampling: Mapping = field(default_factory=dict)
    budget: Mapping = field(default_factory=dict)
    caps: Mapping = field(default_factory=dict)
    k: int = 1
    seed: int = 0
    queue: str = "cpu"
    source: str = "built-in"


BUILTIN = {"heuristic": Profile(name="heuristic", grader="heuristic", queue="cpu")}

_TYPES = {"grader": str, "backend": str, "model": str, "url": str, "options": dict,
          "sampling": dict, "budget": dict, "caps": dict, "k": int, "seed": int, "queue": str}


def load_profiles(path: str | Path | None = None) -> dict[str, Profile]:
    """The built-in profiles plus those of `path` (default: $GAGAR_GRADERS, if set)."""
    path = path or os.environ.get(ENV_VAR)
    profiles = dict(BUILTIN)
    if not path:
        return profiles
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ProfileError(f"{path}: cannot read: {error.strerror or error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ProfileError(f"{path}: not valid TOML: {error}") from error
    extra = sorted(set(data) - {"graders"})
    if extra:
        raise ProfileError(f"{path}: {extra[0]}: unknown top-level key (expected [graders.NAME])")
    graders = data.get("graders", {})
    if not isinstance(graders, dict):
        raise ProfileError(f"{path}: graders: must be a table of [graders.NAME] tables")
    for name, entry in graders.items():
        if name in BUILTIN:
            raise ProfileError(f"{path}: graders.{name}: {name!r} is built in; choose another name")
        profiles[name] = _profile(str(path), name, entry)
    return profiles


def build_grader(profile: Profile) -> Grader:
    """The grader a profile describes; loads its backend (and model) now."""
    if profile.grader not in LLM_GRADERS:
        return load_grader(profile.grader, **profile.options)
    options = dict(profile.options)
    if profile.url:
        options["url"] = profile.url
    if profile.model:
        options["model"] = profile.model
    return load_grader(profile.grader, backend=profile.backend, backend_options=options,
                       sampling=profile.sampling, budget=profile.budget, caps=profile.caps,
                       k=profile.k, seed=profile.seed, name=profile.name)


def _profile(path: str, name: str, entry) -> Profile:
    where = f"{path}: graders.{name}"
    if not isinstance(entry, dict):
        raise ProfileError(f"{where}: must be a table")
    for key, value in entry.items():
        expected = _TYPES.get(key)
        if expected is None:
            raise ProfileError(f"{where}.{key}: unknown key (allowed: {', '.join(_TYPES)})")
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ProfileError(f"{where}.{key}: must be {_TYPE_NAMES[expected]}, "
                               f"got {type(value).__name__}")
    profile = Profile(name=name, source=path, **entry)
    if profile.queue not in QUEUES:
        raise ProfileError(f"{where}.queue: must be one of {', '.join(QUEUES)}, "
                           f"got {profile.queue!r}")
    if profile.k < 1:
        raise ProfileError(f"{where}.k: must be at least 1")
    _check_name(where, "grader", profile.grader, GRADERS)
    if profile.grader in LLM_GRADERS:
        _check_agentic(where, profile)
    return profile


def _check_name(where: str, key: str, name: str, registry: Mapping[str, str]) -> None:
    """A registered name or a `module:Class` path; nothing is imported until the grader is built."""
    try:
        resolve(name, registry, what=key)
    except LoadError as error:
        raise ProfileError(f"{where}.{key}: {error}") from error


def _check_agentic(where: str, profile: Profile) -> None:
    from grading.graders.agentic import Budget
    from grading.tool_limits import Caps

    if not profile.backend:
        raise ProfileError(f"{where}.backend: required (one of {', '.join(BACKENDS)}, "
                           "or module:Class)")
    _check_name(where, "backend", profile.backend, BACKENDS)
    if profile.backend in LOCAL_MODEL_BACKENDS and not profile.model:
        raise ProfileError(f"{where}.model: required: a local model folder")
    if profile.backend == "openai" and not (profile.url and profile.model):
        raise ProfileError(f"{where}.{'model' if profile.url else 'url'}: required for the "
                           "openai backend (url of the server, model name it serves)")
    for key, kind in (("sampling", Sampling), ("budget", Budget), ("caps", Caps)):
        table = getattr(profile, key)
        allowed = {f.name: f.type for f in fields(kind)}
        for option, value in table.items():
            if option not in allowed:
                raise ProfileError(f"{where}.{key}.{option}: unknown key "
                                   f"(allowed: {', '.join(allowed)})")
            integral = str(allowed[option]).startswith("int")
            if isinstance(value, bool) or not isinstance(value, int if integral else int | float):
                raise ProfileError(f"{where}.{key}.{option}: must be "
                                   f"{'an integer' if integral else 'a number'}")
        try:
            kind(**table)
        except (TypeError, ValueError) as error:
            raise ProfileError(f"{where}.{key}: {error}") from error


_TYPE_NAMES = {str: "a string", dict: "a table", int: "an integer"}
