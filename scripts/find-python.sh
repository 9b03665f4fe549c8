#!/usr/bin/env bash
# Print the path of a Python of the given version (3.13): on PATH, else pyenv's newest; nothing if none.
set -uo pipefail
version=$1

if command -v "python$version" >/dev/null && "python$version" -c '' 2>/dev/null; then
    command -v "python$version"
else
    ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V | tail -n 1
fi
exit 0
