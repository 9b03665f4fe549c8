#!/usr/bin/env bash
# Rewrite requirements/*.txt, the exact versions `make` installs, from pyproject.toml's ranges.
# The pins already there are kept (they constrain the resolution): delete a line to let that
# package move, or edit a range in pyproject.toml and the pin together. Resolves on Python 3.11,
# where the llm extra's CPU torch wheel exists; the app and test sets are installed the same
# on 3.11 to 3.13 (make test-py313 checks that).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
mkdir -p requirements
cat requirements/app.txt requirements/test.txt requirements/llm.txt 2>/dev/null | grep -v '^-r' > "$work/pins.txt" || true

# One resolution of everything, so that a package the sets share gets one version in all of them.
resolve() {  # name, then what to install
    local name=$1
    shift
    "$work/venv/bin/pip" install --quiet --dry-run --ignore-installed -c "$work/pins.txt" \
        --report "$work/$name.json" "$@"
}
resolve all -e '.[dev,llm]' -e ./client
"$work/venv/bin/python" - "$work/all.json" > "$work/pins.txt" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if meta["name"] not in ("gagar-studio", "gagar-client"):
        print(f"{meta['name']}=={meta['version'].split('+')[0]}")
EOF
resolve app -e . -e ./client
resolve test -e '.[dev]' -e ./client
resolve llm -e '.[llm]' -e ./client

"$work/venv/bin/python" - "$work" <<'EOF'
import json, sys

def pins(name):
    items = json.load(open(f"{sys.argv[1]}/{name}.json"))["install"]
    return {i["metadata"]["name"]: i["metadata"]["version"].split("+")[0] for i in items
            if i["metadata"]["name"] not in ("gagar-studio", "gagar-client")}

app = pins("app")
heads = {
    "app": "The app's runtime (make install, make demo): everything the web app and its workers import.",
    "test": "The tests' tools and references (pyproject's dev extra), on top of the app's.",
    "llm": "In-process LLM grading and the real trainers (pyproject's llm extra), on top of the app's;\n"
           "# torch==2.13.0 is the CPU wheel on the project machines. xgrammar comes without its\n"
           "# dependencies (the Makefile installs it): its metadata pulls triton, which CPUs never use.",
}
for name, head in heads.items():
    chosen = pins(name)
    lines = [f"# {head}", "# Exact versions, written by scripts/lock.sh from pyproject.toml's ranges."]
    if name != "app":
        lines.append("-r app.txt")
        chosen = {k: v for k, v in chosen.items() if k not in app}
    lines += [f"{k}=={v}" for k, v in sorted(chosen.items(), key=lambda kv: kv[0].lower())]
    with open(f"requirements/{name}.txt", "w") as out:
        out.write("\n".join(lines) + "\n")
EOF
