"""The README's snippets that call the pure core run as a reader copies them."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_core_snippets_run():
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
              if b.startswith("from grading")]
    assert blocks, "the README shows the core without Django"
    for block in blocks:
        scope: dict = {}
        exec(compile(block, str(README), "exec"), scope)  # noqa: S102 (the project's own README)
        assert len(scope["result"].advantages) == len(scope["rewards"])
