"""Export formats, each registered once, as graders and schedules are.

A format declares what it exports (its kind, `Export.Kind`), its name (what `Export.format`
stores and `export_launch` and the `export` command take), the label the launch form
shows, its files' extension and media type, and its writer, by `module:function` path and
imported on first use (grading/loading.py), so this module imports no writer. Everything
else reads it from here: the launch form's choices (a kind with one format keeps the field
hidden), the launch's check (`export_format`, the one error that names the kind's formats),
the `export` command's --format, the file an advantages export writes and the worker's
build. `Export.format` is a plain string: a new format needs no migration.

A writer's contract is its kind's:

- advantages: ``write(batch, chunks, path, *, on_progress=None) -> Written``: the chunks
  (`webapp.advantages.selectors.advantage_chunks`, in order) to the one data file at `path`,
  `advantages.<extension>`, counting each chunk into the Written once it is written
  (`Written.add`) and then calling `on_progress(rows so far, batch.n_trajectories)`;
  `Written.about` holds what the manifest says of the writer. Parquet's and JSON Lines'
  are in webapp/exports/advantages.py;
- sft: ``write(batch, folder, *, viewer, options, on_progress=None) -> dict``: its files into
  `folder`, and the summary the manifest holds (webapp/exports/sft.py).

Adding one is a `register_format` call below and its writer (docs/exports.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grading.loading import load_object
from webapp.models import Export

ADVANTAGES, SFT = Export.Kind.ADVANTAGES, Export.Kind.SFT


class UnknownFormat(ValueError):
    """A format not registered for its kind: "format: reason", naming those that are."""


@dataclass(frozen=True)
class ExportFormat:
    kind: str  # what it exports: an Export.Kind
    name: str  # as stored in Export.format; unique within its kind
    label: str  # the launch form's choice
    extension: str  # of its data files: an advantages export's is advantages.<extension>
    content_type: str  # the media type of its data files
    writer: str  # "module:function", the kind's contract (above), imported on first use

    def write(self) -> Callable:
        """The writer, its module imported now."""
        return load_object(self.writer, {}, what="export writer")


FORMATS: dict[tuple[str, str], ExportFormat] = {}


def register_format(fmt: ExportFormat) -> None:
    """Add `fmt` to its kind's formats, after those already there (the first is the form's
    default). ValueError for an unknown kind, a name taken in that kind or one that does not
    fit the column, or a writer that is not a `module:function` path; nothing is imported."""
    if fmt.kind not in Export.Kind.values:
        kinds = ", ".join(Export.Kind.values)
        raise ValueError(f"export format {fmt.name!r}: unknown kind {fmt.kind!r}; the kinds are {kinds}")
    if (fmt.kind, fmt.name) in FORMATS:
        raise ValueError(f"export format {fmt.name!r} of {fmt.kind} is already registered")
    longest = Export._meta.get_field("format").max_length
    if not 0 < len(fmt.name) <= longest:
        raise ValueError(f"export format {fmt.name!r}: a name has 1 to {longest} characters (Export.format)")
    module, _, function = fmt.writer.partition(":")
    if not (module and function):
        raise ValueError(f"export format {fmt.name!r}: its writer is a module:function path, not {fmt.writer!r}")
    FORMATS[fmt.kind, fmt.name] = fmt


def formats_of(kind: str) -> list[ExportFormat]:
    """The formats of `kind`, in the order they were registered."""
    return [fmt for (of, _), fmt in FORMATS.items() if of == kind]


def export_format(kind: str, name: str) -> ExportFormat:
    """The format `name` of `kind` (a known kind); UnknownFormat, naming the kind's formats."""
    if (kind, name) in FORMATS:
        return FORMATS[kind, name]
    names = [fmt.name for fmt in formats_of(kind)]
    if len(names) == 1:
        raise UnknownFormat(f"format: the {Export.Kind(kind).label} export is {names[0]}, not {name!r}")
    raise UnknownFormat(f"format: must be one of {', '.join(names)}, not {name!r}")


register_format(ExportFormat(kind=ADVANTAGES, name="parquet", label="Parquet", extension="parquet",
                             content_type="application/vnd.apache.parquet",
                             writer="webapp.exports.advantages:write_parquet"))
register_format(ExportFormat(kind=ADVANTAGES, name="jsonl", label="Jsonl", extension="jsonl",
                             content_type="application/x-ndjson", writer="webapp.exports.advantages:write_jsonl"))
register_format(ExportFormat(kind=SFT, name="jsonl", label="Jsonl", extension="jsonl",
                             content_type="application/x-ndjson", writer="webapp.exports.sft:write_sft"))
