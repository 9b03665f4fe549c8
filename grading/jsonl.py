"""Reading JSON Lines files: plain, gzip or zstd, one bounded line at a time.

``read_json_lines`` yields each line's parsed object and records every
problem (a file that cannot be opened, is not a regular file or is cut short, bad UTF-8,
bad JSON, a key given twice, a line over the size limit) in an ``ErrorLog``, then goes on
with the next line. The ``ErrorLog`` of an import also keeps its account against its
``Limits`` (grading/limits.py): every line read, blank ones included, and every byte once
decompressed; past a limit, or at its last allowed error, it raises ``ImportStopped``,
which the import's outermost reader catches (the errors then say why it stopped).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, NoReturn

import orjson
import zstandard

from grading.limits import SHOWN_ERRORS, Limits, size_in_words

_CHUNK = 64 * 1024
_MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd"}
_SUFFIX = {"gzip": ".gz", "zstd": ".zst"}
# orjson reads an integer beyond 64 bits as a float: a line with a float that large
# (rare either way) is read again by json, which keeps such integers exact.
_HUGE = 2.0**63
# C0, DEL and C1: never part of a name, and shown escaped in messages (one error, one line).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ImportStopped(Exception):
    """The import read enough: it reached its error limit or a limit of its work. The
    ``ErrorLog`` holds the errors, the last of them saying why."""


class ErrorLog:
    """Collects ``file:line: field: reason`` messages; keeps the first ``cap``, counts all
    up to ``limits.errors``, where the import stops. Also counts what the import read
    against ``limits`` (``read``)."""

    def __init__(self, cap: int = SHOWN_ERRORS, *, limits: Limits | None = None) -> None:
        self.cap = cap
        self.limits = limits or Limits()
        self.messages: list[str] = []
        self.count = 0
        self.stopped = False  # at a limit: the import reads no more
        self.bytes_read = 0
        self.lines_read = 0

    def add(self, source: str, line: int | None, field: str, reason: str) -> None:
        if self.stopped:
            raise ImportStopped(self._stopped_after())
        self.count += 1
        if len(self.messages) < self.cap:
            where = source if line is None else f"{source}:{line}"
            message = CONTROL_CHARACTERS.sub(_escaped, f"{where}: {field}: {reason}")
            # Unpaired surrogates from JSON escapes would break whoever prints or stores this.
            self.messages.append(message.encode("utf-8", "backslashreplace").decode("utf-8"))
        if self.count >= self.limits.errors:
            self.stopped = True
            raise ImportStopped(self._stopped_after())

    def read(self, source: str, line: int | None, size: int, lines: int = 1) -> None:
        """Counts ``lines`` lines (blank ones too) and ``size`` bytes (decompressed) read
        from ``source``; past the import's limits, an error and ``ImportStopped``."""
        self.bytes_read += size
        self.lines_read += lines
        if self.lines_read > self.limits.import_lines:
            over = self.lines_read - self.limits.import_lines  # `lines` may end past the first line over
            self.stop(source, None if line is None else line - over + 1,
                      f"the import is over {self.limits.import_lines} lines (blank lines count)")
        if self.bytes_read > self.limits.import_bytes:
            self.stop(source, line, f"the import is over {size_in_words(self.limits.import_bytes)} once "
                                    "decompressed")

    def stop(self, source: str, line: int | None, what: str) -> NoReturn:
        """Records that the import is over a limit of its work (``what``), and stops it."""
        self.add(source, line, "file", f"{what}, the most one import may read; stopped reading")
        self.stopped = True
        raise ImportStopped(what)

    def _stopped_after(self) -> str:
        return f"stopped after {self.count} errors, the rest was not read"

    def __bool__(self) -> bool:
        return self.count > 0

    def summary(self) -> str:
        lines = list(self.messages)
        hidden = self.count - len(self.messages)
        tail = []
        if hidden:
            tail.append(f"... and {hidden} more error{'' if hidden == 1 else 's'} not shown")
        if self.count >= self.limits.errors:
            tail.append(self._stopped_after())
        if tail:
            lines.append("; ".join(tail))
        return "\n".join(lines)


def _escaped(match: re.Match) -> str:
    return f"\\u{ord(match[0]):04x}"


class OutOfRangeFloat(float):
    """A JSON number beyond the float range, such as 1e400: infinite, and remembers how it
    was written so that an error can name it."""

    literal: str

    def __new__(cls, literal: str) -> OutOfRangeFloat:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


def read_json_lines(path: Path, source: str, errors: ErrorLog, limit: int | None = None):
    """Yield ``(line number, object, suspicious)`` for each line that parses; `suspicious`
    when it holds NaN/Infinity, a number beyond the float range or a NUL escape, which a
    caller may want to reject. A line may be ``limit`` bytes (default: the import's
    ``limits.line_bytes``)."""
    limit = errors.limits.line_bytes if limit is None else limit
    raw = open_file(path, source, errors)
    if raw is None:
        return
    with raw:
        stream = _decompressed(raw, source, errors)
        if stream is None:
            return
        decoder = _Decoder()
        lines = _Lines(stream, limit, errors, source)
        records = 0
        try:
            for line, data, size in lines:
                records += 1
                if data is None:
                    errors.add(source, line, "line", f"is {size} bytes, over the limit of {limit}")
                    continue
                parsed = decoder.decode(data, first=line == 1)
                if isinstance(parsed, str):
                    errors.add(source, line, "line", parsed)
                else:
                    yield line, parsed, decoder.saw_non_finite or b"\\u0000" in data
        except (EOFError, OSError, zlib.error, zstandard.ZstdError) as exc:
            kind = _compression_of(source) or "file"
            reason = f"truncated or corrupt {kind} data ({exc})"
            errors.add(source, lines.number + 1, "file", reason)
            return
        if not records:
            errors.add(source, None, "file", "empty file (no records)")


def open_file(path: str | Path, source: str, errors: ErrorLog) -> BinaryIO | None:
    """``path`` open for reading when it is a regular file; None, with the reason in
    ``errors``, when it is not: a FIFO would wait for a writer, a device might never end.
    It is opened without waiting, then looked at, so that nothing can swap it meanwhile."""
    nonblocking = getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, os.O_RDONLY | nonblocking | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        errors.add(source, None, "file", "no such file")
        return None
    except IsADirectoryError:
        errors.add(source, None, "file", "is a directory, not a file")
        return None
    except OSError as exc:
        errors.add(source, None, "file", f"cannot open: {exc.strerror or exc}")
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        reason = "is a directory, not a file" if stat.S_ISDIR(mode) else \
            "is not a regular file (a FIFO, socket or device); only files are read"
        errors.add(source, None, "file", reason)
        return None
    if nonblocking:
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _compression_of(source: str) -> str | None:
    name = source.lower()
    return next((kind for kind, suffix in _SUFFIX.items() if name.endswith(suffix)), None)


def _decompressed(raw: io.BufferedReader, source: str, errors: ErrorLog) -> IO[bytes] | None:
    """The stream of decompressed bytes, chosen by suffix and checked against magic bytes."""
    head = raw.peek(4)[:4]
    if not head:
        errors.add(source, None, "file", "empty file (no records)")
        return None
    named = _compression_of(source)
    actual = next((kind for kind, magic in _MAGIC.items() if head.startswith(magic)), None)
    if named != actual:
        if actual:
            reason = f"contents are {actual}-compressed but the name does not end in "
            reason += _SUFFIX[actual]
        else:
            reason = f"name ends in {_SUFFIX[named]} but the contents are not {named} data"
        errors.add(source, None, "file", reason)
        return None
    if named == "gzip":  # read 64 KiB at a time (GzipFile alone reads 8 KiB): 3x faster on blank lines
        return io.BufferedReader(gzip.GzipFile(fileobj=raw, mode="rb"), _CHUNK)
    if named == "zstd":
        return io.BufferedReader(_ZstdReader(raw), _CHUNK)
    return raw


class _ZstdReader(io.RawIOBase):
    """Decompresses zstd frames, raising at the end if the last frame is incomplete.

    zstandard's own stream reader ends silently on truncated input, so the frame and
    block headers are walked first (cheap: they are read, the blocks are skipped).
    """

    def __init__(self, raw: io.BufferedReader) -> None:
        self._problem = _zstd_frame_problem(raw)
        raw.seek(0)
        decompressor = zstandard.ZstdDecompressor()
        self._inner = decompressor.stream_reader(raw, read_across_frames=True, closefd=False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self._inner.readinto(buffer)
        if count == 0 and self._problem:
            raise zstandard.ZstdError(self._problem)
        return count


def _zstd_frame_problem(raw: io.BufferedReader) -> str | None:
    """Why the zstd frames of ``raw`` do not end exactly at the end of the file, if they don't."""
    end = os.fstat(raw.fileno()).st_size
    while (start := raw.tell()) < end:
        magic = raw.read(4)
        if int.from_bytes(magic.ljust(4, b"\0"), "little") & 0xFFFFFFF0 == 0x184D2A50:
            position = start + 8 + int.from_bytes(raw.read(4).ljust(4, b"\0"), "little")
        elif magic == _MAGIC["zstd"]:
            header = magic + raw.read(14)
            try:
                position = start + zstandard.frame_header_size(header)
                has_checksum = zstandard.get_frame_parameters(header).has_checksum
            except zstandard.ZstdError:
                return "file ends inside a frame header"
            last = False
            while not last and position + 3 <= end:
                raw.seek(position)
                block = int.from_bytes(raw.read(3), "little")
                last, kind, size = block & 1, (block >> 1) & 3, block >> 3
                if kind == 3:
                    return "invalid block type"
                position += 3 + (1 if kind == 1 else size)
            if not last:
                return "file ends inside a frame"
            position += 4 if has_checksum else 0
        else:
            return "data after the last frame is not a zstd frame"
        if position > end:
            return "file ends inside a frame"
        raw.seek(position)
    return None


class _Lines:
    """Yields ``(line number, bytes, size)`` for each line that is not blank, without its
    newline; bytes is None for a line over ``limit`` bytes. ``number`` is the number of
    lines read so far.

    A long line is read in chunks and dropped once it passes the limit, so memory stays
    bounded by ``limit`` whatever the line's length. Blank lines are skipped a buffer at a
    time, not one by one, and every line and byte read, blank or not, is counted against
    the import's limits (``ErrorLog.read``): a file of nothing but newlines ends quickly.
    """

    def __init__(self, stream: IO[bytes], limit: int, errors: ErrorLog, source: str) -> None:
        self.stream, self.limit, self.errors, self.source = stream, limit, errors, source
        self.number = 0

    def __iter__(self) -> Iterator[tuple[int, bytes | bytearray | None, int]]:
        stream, limit, errors, source = self.stream, self.limit, self.errors, self.source
        while piece := stream.readline(_CHUNK):
            self.number += 1
            size = len(piece)
            errors.read(source, self.number, size)
            if piece.endswith(b"\n"):  # the newline dropped, so JSON errors give the column of the line itself
                if piece.isspace():
                    self._skip_blank_lines()
                    continue
                yield self.number, (piece[:-1] if size <= limit + 1 else None), size - 1
                continue
            data: bytearray | None = bytearray(piece)
            while piece and not piece.endswith(b"\n"):
                piece = stream.readline(_CHUNK)
                errors.read(source, self.number, len(piece), 0)
                size += len(piece)
                if data is not None and size <= limit + 1:
                    data += piece
                else:
                    data = None
            if piece.endswith(b"\n"):
                size -= 1
                if data is not None:
                    del data[-1]
            if data is not None and (not data or data.isspace()):
                continue
            yield self.number, (data if size <= limit else None), size

    def _skip_blank_lines(self) -> None:
        """Consumes the whole blank lines that come next, a buffer at a time."""
        stream = self.stream
        while buffered := stream.peek(_CHUNK):
            end = buffered.rfind(b"\n", 0, len(buffered) - len(buffered.lstrip())) + 1
            if not end:
                return
            lines = buffered.count(b"\n", 0, end)
            stream.read(end)
            self.number += lines
            self.errors.read(self.source, self.number, end, lines)
            if end < len(buffered):
                return


class _Decoder:
    """Strict JSON: UTF-8 only, each key once per object, and non-finite numbers noted so
    they can be reported by field."""

    def __init__(self) -> None:
        self.saw_non_finite = False
        self._json = json.JSONDecoder(parse_constant=self._constant, parse_float=self._float,
                                      object_pairs_hook=_object_of_pairs)

    def _constant(self, name: str) -> float:
        self.saw_non_finite = True
        return float(name)

    def _float(self, literal: str) -> float:
        number = float(literal)
        if math.isfinite(number):
            return number
        self.saw_non_finite = True
        return OutOfRangeFloat(literal)

    def decode(self, data: bytes | bytearray, *, first: bool, object_only: bool = True) -> Any:
        """The parsed value (an object, unless not ``object_only``), or a ``Reason`` (a
        string) saying why the data is not one."""
        self.saw_non_finite = False
        try:  # orjson takes strict UTF-8 JSON without NaN: most lines, 3x faster
            value = orjson.loads(data)
        except orjson.JSONDecodeError:  # the slow path below says why, or takes the line
            pass
        else:
            if object_only and not isinstance(value, dict):
                return Reason(f"must be a JSON object, got {json_kind(value)}")
            keys, huge = _scan(value)
            if not huge and _keys_once(data, keys):
                return value
        try:
            text = data.decode("utf-8-sig" if first else "utf-8")
        except UnicodeDecodeError as exc:
            return Reason(f"not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}")
        try:
            value = self._json.decode(text)
        except json.JSONDecodeError as exc:
            # Some messages end in "at" already ("Unterminated string starting at").
            return Reason(f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}", exc.lineno)
        except _KeyGivenTwice as exc:
            return Reason(f"key {exc.key!r} is given twice in one object")
        except ValueError as exc:  # e.g. an integer with too many digits
            return Reason(f"not valid JSON: {exc}")
        except RecursionError:
            return Reason("not valid JSON: nested too deeply")
        if object_only and not isinstance(value, dict):
            return Reason(f"must be a JSON object, got {json_kind(value)}")
        return value


class Reason(str):
    """Why data is not the JSON wanted; ``line``: where, in data of several lines."""

    line: int | None

    def __new__(cls, text: str, line: int | None = None) -> Reason:
        reason = super().__new__(cls, text)
        reason.line = line
        return reason


def parse_json(data: bytes) -> tuple[Any, bool]:
    """``(value, suspicious)`` of a whole JSON document (a file), read as strictly as a
    line: the value, or a ``Reason`` when it is not JSON or gives a key twice in one
    object; and whether it may hold values a database cannot store (NaN, a NUL escape)."""
    decoder = _Decoder()
    value = decoder.decode(data, first=True, object_only=False)
    return value, decoder.saw_non_finite or b"\\u0000" in data


class _KeyGivenTwice(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_of_pairs(pairs: list[tuple[str, Any]]) -> dict:
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyGivenTwice(key)
            seen.add(key)
    return value


def _scan(value: Any) -> tuple[int, bool]:
    """(the keys of all the objects in ``value``, whether it holds a float of _HUGE or more)."""
    keys, huge = 0, False
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and abs(item) >= _HUGE:
            huge = True
    return keys, huge


_KEY_END = re.compile(rb'"[ \t\r\n]*:')
_ESCAPED_QUOTE_COLON = re.compile(rb'\\":')


def _keys_once(data: bytes | bytearray, keys: int) -> bool:
    """Whether no object of ``data`` gives a key twice, known from the text alone: True
    when the text has as many keys as the parsed value (``keys``), which a key given twice
    leaves one short; False when it has more, or when counting cannot tell (json then reads
    the data, naming such a key).

    Outside strings a key is a string and a colon, ``"key":``: so every quote followed by
    a colon ends a key, or is a quote escaped inside a string (JSON in JSON, as a tool
    call's arguments: ``"{\\"a\\": 1}"``), which an odd run of backslashes comes before.
    This runs on every line: one regular expression finds the quotes, and only text with
    more of them than keys looks at the backslashes. Text of many quotes (more than a
    megabyte, and 100,000 quotes), or far more than keys, is left to json: counting them
    would cost more memory or time than json's reading.
    """
    if len(data) > 1024**2 and data.count(b'"') > 100_000:
        return False
    ends = len(_KEY_END.findall(data))
    if ends == keys:
        return True
    if ends - keys > 1000:
        return False
    inside_strings = 0
    for match in _ESCAPED_QUOTE_COLON.finditer(data):
        last = first = match.start()  # the run of backslashes before the quote
        while first and data[first - 1] == 0x5C:
            first -= 1
        inside_strings += (last - first + 1) % 2
    return ends - inside_strings == keys


def json_bytes(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON of a value read by ``read_json_lines``; ValueError if it has
    no JSON form (an unpaired surrogate). NaN and Infinity come out as null: callers
    reject them first, from the ``suspicious`` flag."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except orjson.JSONEncodeError:  # integers beyond 64 bits, surrogates: json says which
        text = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))
        return text.encode("utf-8")  # UnicodeEncodeError (a ValueError) on a surrogate


def json_kind(value: Any) -> str:
    """How a JSON value reads in an error message: a number as written, else its type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, OutOfRangeFloat):
        return value.literal if len(value.literal) <= 24 else "a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(str(abs(value)))}-digit integer"
    names = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), "null")
