"""Reading JSON Lines files: plain, gzip or zstd, one bounded line at a time.

``read_json_lines`` yields each line's parsed object and records every
problem (a file that cannot be opened or is cut short, bad UTF-8, bad JSON, a
line over the size limit) in an ``ErrorLog``, then goes on with the next line.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import zstandard

_CHUNK = 64 * 1024
_MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd"}
_SUFFIX = {"gzip": ".gz", "zstd": ".zst"}
# orjson reads an integer beyond 64 bits as a float: a line with a float that large
# (rare either way) is read again by json, which keeps such integers exact.
_HUGE = 2.0**63
# C0, DEL and C1: never part of a name, and shown escaped in messages (one error, one line).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ErrorLog:
    """Collects ``file:line: field: reason`` messages; keeps the first ``cap``, counts all."""

    def __init__(self, cap: int = 50) -> None:
        self.cap = cap
        self.messages: list[str] = []
        self.count = 0

    def add(self, source: str, line: int | None, field: str, reason: str) -> None:
        self.count += 1
        if len(self.messages) < self.cap:
            where = source if line is None else f"{source}:{line}"
            message = CONTROL_CHARACTERS.sub(_escaped, f"{where}: {field}: {reason}")
            # Unpaired surrogates from JSON escapes would break whoever prints or stores this.
            self.messages.append(message.encode("utf-8", "backslashreplace").decode("utf-8"))

    def __bool__(self) -> bool:
        return self.count > 0

    def summary(self) -> str:
        lines = list(self.messages)
        hidden = self.count - len(self.messages)
        if hidden:
            lines.append(f"... and {hidden} more error{'' if hidden == 1 else 's'}")
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


def read_json_lines(path: Path, source: str, errors: ErrorLog, limit: int):
    """Yield ``(line number, object, suspicious)`` for each line that parses; `suspicious`
    when it holds NaN/Infinity, a number beyond the float range or a NUL escape, which a
    caller may want to reject."""
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        errors.add(source, None, "file", "no such file")
        return
    except IsADirectoryError:
        errors.add(source, None, "file", "is a directory, not a file")
        return
    except OSError as exc:
        errors.add(source, None, "file", f"cannot open: {exc.strerror or exc}")
        return
    with raw:
        stream = _decompressed(raw, source, errors)
        if stream is None:
            return
        decoder = _Decoder()
        line = records = 0
        try:
            for line, data, size in _lines(stream, limit):
                if data is None:
                    records += 1
                    errors.add(source, line, "line", f"is {size} bytes, over the limit of {limit}")
                    continue
                if not data or data.isspace():
                    continue
                records += 1
                parsed = decoder.decode(data, first=line == 1)
                if isinstance(parsed, str):
                    errors.add(source, line, "line", parsed)
                else:
                    yield line, parsed, decoder.saw_non_finite or b"\\u0000" in data
        except (EOFError, OSError, zlib.error, zstandard.ZstdError) as exc:
            kind = _compression_of(source) or "file"
            reason = f"truncated or corrupt {kind} data ({exc})"
            errors.add(source, line + 1, "file", reason)
            return
        if not records:
            errors.add(source, None, "file", "empty file (no records)")


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
    if named == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
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


def _lines(stream: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield ``(line number, bytes, size)`` without the newline; bytes is None for a line
    over ``limit`` bytes.

    A long line is read in chunks and dropped once it passes the limit, so memory stays
    bounded by ``limit`` whatever the line's length.
    """
    number = 0
    while piece := stream.readline(_CHUNK):
        number += 1
        data: bytes | bytearray | None = piece
        size = len(piece)
        if not piece.endswith(b"\n"):
            data = bytearray(piece)
            while piece and not piece.endswith(b"\n"):
                piece = stream.readline(_CHUNK)
                size += len(piece)
                if data is not None and size <= limit + 1:
                    data += piece
                else:
                    data = None
        if piece.endswith(b"\n"):  # dropped so JSON errors give the column of the line itself
            size -= 1
            if isinstance(data, bytearray):
                del data[-1]
            elif data is not None:
                data = data[:-1]
        yield number, (data if size <= limit else None), size


class _Decoder:
    """Strict JSON: UTF-8 only, and non-finite numbers noted so they can be reported by field."""

    def __init__(self) -> None:
        self.saw_non_finite = False
        self._json = json.JSONDecoder(parse_constant=self._constant, parse_float=self._float)

    def _constant(self, name: str) -> float:
        self.saw_non_finite = True
        return float(name)

    def _float(self, literal: str) -> float:
        number = float(literal)
        if math.isfinite(number):
            return number
        self.saw_non_finite = True
        return OutOfRangeFloat(literal)

    def decode(self, data: bytes | bytearray, *, first: bool) -> Any:
        """The parsed value, or a string saying why the line is not JSON."""
        self.saw_non_finite = False
        try:  # orjson takes strict UTF-8 JSON without NaN: most lines, 3x faster
            value = orjson.loads(data)
        except orjson.JSONDecodeError:  # the slow path below says why, or takes the line
            pass
        else:
            if not isinstance(value, dict):
                return f"must be a JSON object, got {json_kind(value)}"
            if not _has_huge_float(value):
                return value
        try:
            text = data.decode("utf-8-sig" if first else "utf-8")
        except UnicodeDecodeError as exc:
            return f"not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        try:
            value = self._json.decode(text)
        except json.JSONDecodeError as exc:
            # Some messages end in "at" already ("Unterminated string starting at").
            return f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
        except ValueError as exc:  # e.g. an integer with too many digits
            return f"not valid JSON: {exc}"
        except RecursionError:
            return "not valid JSON: nested too deeply"
        if not isinstance(value, dict):
            return f"must be a JSON object, got {json_kind(value)}"
        return value


def _has_huge_float(value: dict) -> bool:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float) and abs(item) >= _HUGE:
            return True
    return False


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
