"""The issue's own examples (issue 32, part 3): found in a statement as GitHub issues write them,
and run in the bwrap sandbox on the base code, the reference fix and a candidate."""

import sys

import pytest

from grading.execution.examples import (
    CUT,
    DRIVER_SOURCE,
    MAX_EXAMPLE_CHARS,
    Example,
    ExampleOutcome,
    ExampleRuns,
    compare_examples,
    statement_examples,
)
from tests.grading import probe_fixtures
from tests.grading.probe_fixtures import CLAMPS_INVERTED, REFERENCE, sandbox_side_imports

codebase = probe_fixtures.codebase
patch_of = probe_fixtures.patch_of
test_patch = probe_fixtures.test_patch
bwrap_installed = probe_fixtures.bwrap_installed
sandbox = probe_fixtures.sandbox
environment = probe_fixtures.environment
workroot = probe_fixtures.workroot
probe = probe_fixtures.probe

STATEMENT = '''\
### clamp ignores its bounds

`clamp(x, low, high)` returns `x` whatever the bounds:

```python
from calc.ops import clamp

print(clamp(20, 10, 0))
```

In a shell:

    >>> from calc.ops import clamp
    >>> clamp(-1, 0, 10)
    -1
    >>> for x in (11,
    ...           12):
    ...     print(clamp(x, 0, 10))
    11
    12

It should say the bounds are inverted instead:

```
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
ValueError: low > high
```

```bash
$ python -c "from calc.ops import clamp; print(clamp(20, 10, 0))"
20
```

```
[0, 10]
```
'''
SCRIPT = "from calc.ops import clamp\n\nprint(clamp(20, 10, 0))\n"
SESSION = "from calc.ops import clamp\nclamp(-1, 0, 10)\nfor x in (11,\n          12):\n    print(clamp(x, 0, 10))\n"


def test_it_finds_the_python_block_and_the_session_and_leaves_out_the_traceback_the_shell_and_the_output():
    assert statement_examples(STATEMENT) == [Example(SCRIPT), Example(SESSION, session=True)]


def test_a_fenced_session_is_one_example_without_its_outputs():
    statement = "```pycon\n>>> import calc\n>>> calc\n<module 'calc'>\n>>> 1 + 1\n2\n```\n"

    assert statement_examples(statement) == [Example("import calc\ncalc\n1 + 1\n", session=True)]


def test_examples_are_bounded_in_count_and_size_and_repeats_count_once():
    blocks = "".join(f"```py\nprint({i})\n```\n" for i in range(20))

    assert statement_examples(blocks + "```py\nprint(0)\n```\n", limit=3) == [
        Example("print(0)\n"), Example("print(1)\n"), Example("print(2)\n")]
    assert statement_examples("```python\n" + "x = 1\n" * MAX_EXAMPLE_CHARS + "```\n") == []


def test_a_block_left_open_runs_to_the_end_of_the_statement_and_a_shorter_fence_does_not_close_it():
    assert statement_examples("```python\nprint(1)\n") == [Example("print(1)\n")]
    assert statement_examples("````python\nprint(1)\n```\nprint(2)\n````\n") == []  # ``` is no Python


@pytest.fixture(scope="module")
def ran(probe):
    """The statement's examples on the base, the reference and a candidate that clamps inverted
    bounds instead of refusing them."""
    examples = statement_examples(STATEMENT)
    return {name: probe(files, examples=examples).examples
            for name, files in (("base", None), ("reference", REFERENCE), ("candidate", CLAMPS_INVERTED))}


def test_each_copy_prints_its_own_behaviour_on_the_examples(ran):
    assert [o.output for o in ran["base"].outcomes] == ["20\n", "-1\n11\n12\n"]
    assert ran["reference"].outcomes == (ExampleOutcome("exit", 1, "ValueError: low > high\n"),
                                         ExampleOutcome("exit", 0, "0\n10\n10\n"))
    assert ran["candidate"].outcomes == (ExampleOutcome("exit", 0, "10\n"), ExampleOutcome("exit", 0, "0\n10\n10\n"))


def test_the_candidate_behaves_like_the_reference_on_the_session_and_not_on_the_script_both_fixed(ran):
    compared = compare_examples(ran["base"], ran["reference"], ran["candidate"])

    assert [(c.like_reference, c.fix_changes_it) for c in compared] == [(False, True), (True, True)]


def test_an_example_that_loops_for_ever_stops_at_its_time_and_the_next_one_runs(probe):
    examples = [Example("while True:\n    pass\n"), Example("print('after')\n")]
    runs = probe(None, examples=examples, seconds_each=1).examples

    assert runs.outcomes == (ExampleOutcome("timeout", None, ""), ExampleOutcome("exit", 0, "after\n"))


def test_an_example_that_prints_without_end_is_kept_to_its_first_8_kib(probe):
    examples = [Example("print('y' * 10**7)\n"), Example("while True:\n    print('z' * 1000)\n")]
    printed, endless = probe(None, examples=examples, seconds_each=2).examples.outcomes

    assert printed.status == "exit" and printed.output == "y" * 8192 + CUT
    assert endless.status == "timeout" and endless.output == ("z" * 1000 + "\n") * 8 + "z" * 184 + CUT


def test_outputs_name_no_memory_address_and_no_copy_folder(probe):
    examples = [Example("import os\nprint(object(), os.getcwd())\n")]

    assert probe(None, examples=examples).examples.outcomes[0].output == "<object object at 0x?> <copy>\n"


def test_a_session_goes_on_past_a_statement_that_raises_and_a_script_stops_there(probe):
    examples = [Example("1 / 0\nprint('on')\n", session=True), Example("1 / 0\nprint('on')\n")]

    assert probe(None, examples=examples).examples.outcomes == (
        ExampleOutcome("exit", 1, "ZeroDivisionError: division by zero\non\n"),
        ExampleOutcome("exit", 1, "ZeroDivisionError: division by zero\n"))


def test_a_record_the_examples_swap_for_a_link_is_not_followed(probe):
    swaps = "import glob, os\nfor record in glob.glob('e*/examples.jsonl'):\n" \
            "    os.remove(record)\n    os.symlink('/etc/passwd', record)\n"
    runs = probe(None, examples=[Example("print(1)\n"), Example(swaps), Example("print(3)\n")]).examples

    assert runs.outcomes == (None, None, None)
    assert runs.problems == ("the examples' driver's record was replaced (Too many levels of symbolic links)",)


def test_an_example_not_run_on_a_copy_compares_to_nothing():
    ok = ExampleOutcome("exit", 0, "1\n")
    compared = compare_examples(ExampleRuns((ok, ok)), ExampleRuns((ok, None)), ExampleRuns((ok,)))

    assert [(c.like_reference, c.fix_changes_it) for c in compared] == [(True, False), (None, None)]
    assert ExampleRuns.from_dict(ExampleRuns((ok, None), ("why",)).to_dict()) == ExampleRuns((ok, None), ("why",))


def test_the_driver_is_python_3_6_of_the_standard_library_alone():
    assert sandbox_side_imports(DRIVER_SOURCE) <= sys.stdlib_module_names
