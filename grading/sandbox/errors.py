"""The two ways a sandbox says no before anything runs."""

from __future__ import annotations


class SandboxConfigError(Exception):
    """The deployment's sandbox cannot run anything (a missing `bwrap` or container runtime,
    a template without `{command}`...). Retrying cannot help: the worker stops at start."""

    permanent = True


class PatchRefused(Exception):
    """A candidate's patch that is never run: it does not apply, or it would write outside
    the copy of the codebase. `path` is the file it names (empty when the patch as a whole
    is at fault), `reason` the rule it breaks."""

    permanent = True

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.path, self.reason)
