"""World files as plain values, fast: YAML and JSON documents, and tables (CSV, JSON lines, Parquet).

A world document is read here without positions: JSON with the json module,
the plain YAML that worlds are usually written in by a scanner of that subset,
anything else with libyaml. Reading it keeps no position, so the reader in
:mod:`engine.world.readers` reads a document here first and, only when something is
wrong, reads it again with positions (PyYAML's located nodes) for its message.

The subset is block mappings at the top, block sequences of one-line items,
and flow sequences and mappings of plain and quoted scalars, with comments.
Whatever the subset scanner reads, PyYAML reads the same; anything else
(anchors, tags, multi-line scalars, escapes, tabs, ...) is left to libyaml.

A world of tables is a folder with the tables ``privilog pipeline`` reads:
``entities`` (``entity``), ``grants`` (``principal, action, entity``),
``members`` (``principal, group``), and ``admins`` (``principal``), each a
CSV file with a header, JSON lines, or Parquet (with pyarrow installed); and a
world's ``facts:``, a folder ``facts`` of one file a relation, ``RELATION.csv``
(no header: a row's values in the relation's order, as the policy declares it) or
``RELATION.jsonl`` (each line a JSON list of text values).
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from privilog.dsl.errors import OneLineError, article
from privilog.dsl.files import WORLD_BYTES_VAR, FileRefused, check_regular, decode, world_limit


class Unreadable(Exception):
    """The fast readers cannot read this text (the positioned reader will say why)."""


class _NotSimple(Exception):
    """Outside the subset of YAML the scanner reads."""


class TableError(OneLineError):
    """A world table that cannot be read, with where it is wrong."""

    located = True


# ---- documents ------------------------------------------------------------------------


def load_document(text: str) -> Any:
    """A YAML or JSON document as plain values (None when empty); :class:`Unreadable` if not readable here."""
    if "<<" in text:
        raise Unreadable  # a merge key: the positioned reader does not merge, and names it
    first = _LEADING.match(text).end()  # type: ignore[union-attr]
    if text[first : first + 1] == "{" and "\t" not in text and "\\u" not in text:
        # JSON that YAML reads the same: no tabs (YAML refuses some), no \u escapes (surrogates differ)
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except _Repeated:
            raise Unreadable from None  # a key written twice: the positioned reader names it
        except (ValueError, RecursionError):
            pass
    try:
        return _Subset(text).document()
    except _NotSimple:
        pass
    if _LIBYAML_DIFFERS.search(text, 1 if text.startswith("\ufeff") else 0):
        raise Unreadable
    if _ANCHOR_OR_ALIAS.search(text):
        raise Unreadable  # perhaps an anchor or an alias, which the positioned reader refuses
    try:
        return yaml.load(text, Loader=_UniqueKeysLoader)
    except Exception:  # whatever it is, the positioned reader meets it again and reports it
        raise Unreadable from None


class _Repeated(Exception):
    """A mapping with a key written twice (refused; the positioned reader says where)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, or :class:`_Repeated` when a key is written twice."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Repeated
    return out


class _UniqueKeysLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader, giving up (to the positioned reader) on a key written twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [k.value if isinstance(k, yaml.ScalarNode) else id(k) for k, _ in node.value]
        if len(set(keys)) != len(keys):
            raise _Repeated
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


_LEADING = re.compile(r"[ \t\r\n]*")
# Where libyaml and PyYAML's own reader part ways (found by fuzzing one against the other): tabs,
# block scalars, `?` where it may open a complex key (after a blank, `[`, `{` or `,`, or first: a
# wildcard grant's `?` inside an id is plain text), YAML 1.1's other line breaks and byte order
# marks after the first character.
_LIBYAML_DIFFERS = re.compile("[\t|>\x85\u2028\u2029\ufeff]|(?<![^\\s\\[{,])[?]")
# no `: `, ` #`, flow indicators; `$`, `*` and `?` only after the first character (`*x` is an
# alias, `? ` a key): a nested class's `$`, a wildcard grant's `*` and `?`
# `&` or `*` where a token starts: an anchor or an alias (a wildcard grant's `*` inside an id is not)
_ANCHOR_OR_ALIAS = re.compile(r"(?<![^\s\[{,])[&*]")
_PLAIN = r"[A-Za-z0-9_][A-Za-z0-9_./@$*?\-]*(?::[A-Za-z0-9_./@$*?\-]+)*"
_SCALAR = rf"""'(?:[^'\n]|'')*'|"[^"\\\n]*"|{_PLAIN}"""
_TOKEN = re.compile(_SCALAR)
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:[ ]+(.*))?")
_BLANK = re.compile(r"[ ]*(?:#.*)?")  # nothing, or only a comment
_ONE = re.compile(rf"({_SCALAR})[ ]*(?:[ ]#.*)?")
_TRIPLE = re.compile(rf"\[[ ]*({_SCALAR})[ ]*,[ ]*({_SCALAR})[ ]*,[ ]*({_SCALAR})[ ]*\][ ]*(?:[ ]#.*)?")
_PAIR = re.compile(rf"\[[ ]*({_SCALAR})[ ]*,[ ]*({_SCALAR})[ ]*\][ ]*(?:[ ]#.*)?")
_SPACE = re.compile(r"(?:[ \n]+(?:#[^\n]*)?)*")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # with non-ASCII text, left to libyaml


class _Scalars(dict[str, Any]):
    """A scalar token's value, by its text: quoted ones are text, plain ones as YAML resolves them.

    A text that is not one whole token is outside the subset.
    """

    _resolver = yaml.resolver.Resolver()
    _str = "tag:yaml.org,2002:str"
    _null = "tag:yaml.org,2002:null"

    def __missing__(self, token: str) -> Any:
        if not _TOKEN.fullmatch(token):
            raise _NotSimple
        first = token[0]
        if first == "'":
            value: Any = token[1:-1].replace("''", "'")
        elif first == '"':
            value = token[1:-1]
        else:
            tag = self._resolver.resolve(yaml.ScalarNode, token, (True, False))  # type: ignore[no-untyped-call]
            if tag == self._null:
                value = None
            elif tag == self._str:
                value = token
            else:
                raise _NotSimple  # numbers, booleans, dates: not in a world; libyaml builds them
        self[token] = value
        return value


class _Subset:
    """The plain YAML worlds are written in (the module's docstring), without libyaml's nodes.

    Lines in the shapes ``save_world`` writes are split with string methods, all
    at once; every other line of the subset is matched token by token.
    """

    def __init__(self, text: str):
        if text.startswith("\ufeff"):
            text = text[1:]
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        if not text.isascii() or _CONTROL.search(text):
            raise _NotSimple
        self.lines = text.split("\n")
        self.scalars = _Scalars()

    def document(self) -> dict[str, Any] | None:
        lines = self.lines
        keys = [i for i, line in enumerate(lines) if line and line[0] not in " #-"]
        if not self._blank(lines[: keys[0]] if keys else lines):
            raise _NotSimple
        out: dict[str, Any] = {}
        for number, at in enumerate(keys):
            m = _KEY_LINE.fullmatch(lines[at])
            key = None if m is None else self.scalars[m[1]]
            if m is None or not isinstance(key, str) or key in out:
                raise _NotSimple
            rest = m[2] or ""
            body = lines[at + 1 : keys[number + 1] if number + 1 < len(keys) else len(lines)]
            if _BLANK.fullmatch(rest):
                out[key] = self._block(body)
            elif rest[0] in "[{":
                out[key] = self._flow_text("\n".join([rest, *body]))
            else:
                one = _ONE.fullmatch(rest)
                if one is None or not self._blank(body):
                    raise _NotSimple
                out[key] = self.scalars[one[1]]
        return out or None  # nothing but comments: an empty document

    @staticmethod
    def _blank(lines: list[str]) -> bool:
        return all(_BLANK.fullmatch(line) for line in lines)

    def _block(self, body: list[str]) -> list[Any] | None:
        """The block sequence that is ``body``; None if it has nothing."""
        first = next((line for line in body if not _BLANK.fullmatch(line)), None)
        if first is None:
            return None
        item = first.lstrip(" ")
        if not item.startswith("-"):
            raise _NotSimple  # an indented value that is not a sequence
        prefix = first[: len(first) - len(item)] + "-"
        items = self._flat_items(body, prefix)
        if items is not None:
            return items
        items = []
        for line in body:
            if _BLANK.fullmatch(line):
                continue
            if not line.startswith(prefix):
                raise _NotSimple  # deeper, shallower or misaligned
            items.append(self._item(line[len(prefix) :]))
        return items

    def _flat_items(self, body: list[str], prefix: str) -> list[Any] | None:
        """Every line ``PREFIX [S, S, ...]`` of scalars, split with string methods; None if not all are."""
        start = prefix + " ["
        skip = len(start)
        sc = self.scalars
        items = []
        try:
            for line in body:
                if line.startswith(start) and line.endswith("]"):
                    items.append(
                        [
                            f[1:-1] if f[:1] == "'" == f[-1:] and f.count("'") == 2 else sc[f]
                            for f in line[skip:-1].split(", ")
                        ]
                    )
                elif line:
                    return None
        except _NotSimple:
            return None
        return items

    def _item(self, body: str) -> Any:
        """One block sequence item, after its ``-``."""
        if not body.startswith(" "):
            raise _NotSimple
        body = body.lstrip(" ")
        scalars = self.scalars
        if (m := _TRIPLE.fullmatch(body)) is not None:
            return [scalars[m[1]], scalars[m[2]], scalars[m[3]]]
        if (m := _PAIR.fullmatch(body)) is not None:
            return [scalars[m[1]], scalars[m[2]]]
        if body[:1] in ("[", "{"):
            return self._flow_text(body)
        if (m := _ONE.fullmatch(body)) is not None:
            return scalars[m[1]]
        raise _NotSimple

    def _flow_text(self, text: str) -> Any:
        """A flow collection and nothing after it but spaces and comments."""
        flat = text.rstrip(" \n")
        if flat.startswith("[") and flat.endswith("]") and "#" not in flat:
            try:
                return self._scalar_list(flat[1:-1])
            except _NotSimple:
                pass
        value, pos = self._flow(text, 0)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos != len(text):
            raise _NotSimple
        return value

    def _scalar_list(self, inner: str) -> list[Any]:
        """The scalars of a flow sequence ``[S, S, ...]`` (given without brackets), split at commas."""
        fields = [piece.strip(" \n") for piece in inner.split(",")]
        if len(fields) > 1 and not fields[-1]:
            fields.pop()  # a trailing comma
        elif fields == [""]:
            return []
        sc = self.scalars
        return [
            f[1:-1] if f[:1] == "'" == f[-1:] and f.count("'") == 2 and "\n" not in f else sc[f] for f in fields
        ]

    def _flow(self, text: str, pos: int) -> tuple[Any, int]:
        """The flow value at ``pos`` (after any space), and where it ends."""
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        opening = text[pos : pos + 1]
        if opening == "[":
            items: list[Any] = []
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            while text[pos : pos + 1] != "]":
                item, pos = self._flow(text, pos)
                items.append(item)
                pos = self._separator(text, pos, "]")
            return items, pos + 1
        if opening == "{":
            mapping: dict[str, Any] = {}
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            while text[pos : pos + 1] != "}":
                key = _TOKEN.match(text, pos)
                if key is None or text[key.end() : key.end() + 2] not in (": ", ":\n"):
                    raise _NotSimple
                name = self.scalars[key[0]]
                if not isinstance(name, str) or name in mapping:
                    raise _NotSimple
                mapping[name], pos = self._flow(text, key.end() + 1)
                pos = self._separator(text, pos, "}")
            return mapping, pos + 1
        token = _TOKEN.match(text, pos)
        if token is None:
            raise _NotSimple
        return self.scalars[token[0]], token.end()

    @staticmethod
    def _separator(text: str, pos: int, closing: str) -> int:
        """After an item: the position of the closing bracket or of the next item."""
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        ch = text[pos : pos + 1]
        if ch == ",":
            return _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if ch != closing:
            raise _NotSimple
        return pos


# ---- tables ---------------------------------------------------------------------------

WORLD_TABLES: dict[str, tuple[str, ...]] = {
    "entities": ("entity",),
    "grants": ("principal", "action", "entity"),
    "members": ("principal", "group"),
    "admins": ("principal",),
}
TABLE_FORMATS = {".csv": "csv", ".jsonl": "json", ".ndjson": "json", ".json": "json", ".parquet": "parquet"}


@dataclass(frozen=True)
class TableFile:
    """One file of a world table, in one format."""

    table: str
    path: Path
    fmt: str  # csv, json (lines) or parquet

    @property
    def columns(self) -> tuple[str, ...]:
        return WORLD_TABLES[self.table]

    def where(self, row: int) -> str:
        """Where a row is: ``file:line`` (``file: row N`` in Parquet)."""
        return f"{self.path}: row {row}" if self.fmt == "parquet" else f"{self.path}:{row}"

    def fail(self, row: int, message: str) -> TableError:
        return TableError(f"{self.where(row)}: {message}")

    def rows(self) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Each row's number (its line; its row in Parquet) and values, in the table's columns."""
        if self.fmt == "csv":
            return self._csv()
        if self.fmt == "json":
            return self._json_lines()
        return self._parquet()

    def _missing(self, found: list[str]) -> TableError:
        missing = [c for c in self.columns if c not in found]
        return TableError(
            f"{self.path}: the {self.table} table needs the columns {', '.join(self.columns)}; "
            f"missing {', '.join(missing)} (found {', '.join(found) or 'none'})"
        )

    def _not_utf8(self) -> TableError:
        """Where the table's text stops being UTF-8: its line and column (not a byte offset)."""
        try:
            decode(self.path.read_bytes(), self.path, f"{self.table} table")
        except FileRefused as error:
            return TableError(str(error))
        except OSError as error:
            return TableError(f"{self.path}: cannot read the {self.table} table: {error.strerror}")
        return TableError(f"{self.path}: the {self.table} table is not UTF-8 text")

    def _check(self) -> None:
        """Only a regular file within ``PRIVILOG_MAX_WORLD_BYTES`` is read (never a FIFO or a device)."""
        try:
            check_regular(self.path, f"{self.table} table", WORLD_BYTES_VAR, world_limit())
        except FileRefused as error:
            raise TableError(str(error)) from None

    def _open(self) -> Any:
        self._check()
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the check
                os.close(fd)
                raise TableError(f"{self.path}: not a regular file; {article(self.table)} table is read only from one")
            return os.fdopen(fd, encoding="utf-8-sig", newline="")
        except OSError as error:
            raise TableError(f"{self.path}: cannot read the {self.table} table: {error.strerror}") from None

    def _csv(self) -> Iterator[tuple[int, tuple[Any, ...]]]:
        with self._open() as file:
            reader = csv.reader(file, strict=True)
            try:
                header = next(reader, [])
                wanted = [header.index(c) if c in header else -1 for c in self.columns]
                if -1 in wanted:
                    raise self._missing(header)
                width = len(header)
                line = reader.line_num
                for row in reader:
                    start, line = line + 1, reader.line_num
                    if not row:
                        continue
                    if len(row) != width:
                        raise self.fail(
                            start, f"a row of {width} fields ({', '.join(header)}) has {len(row)}: {','.join(row)}"
                        )
                    yield start, tuple(row[k] for k in wanted)
            except csv.Error as error:
                raise self.fail(reader.line_num, f"not valid CSV: {error}") from None
            except UnicodeDecodeError:
                raise self._not_utf8() from None

    def _json_lines(self) -> Iterator[tuple[int, tuple[Any, ...]]]:
        columns = self.columns
        decode = json.JSONDecoder().decode
        with self._open() as file:
            try:
                for number, line in enumerate(file, start=1):
                    if not line.strip():
                        continue
                    try:
                        row = decode(line.rstrip("\r\n"))
                    except ValueError as error:
                        problem = str(error).partition(":")[0]
                        column = getattr(error, "colno", 0)
                        raise TableError(f"{self.path}:{number}:{column}: not valid JSON: {problem}") from None
                    if not isinstance(row, dict):
                        raise self.fail(number, f"a row is a JSON object with the keys {', '.join(columns)}")
                    absent = [c for c in columns if c not in row]
                    if absent:
                        raise self.fail(number, f"a row of the {self.table} table needs `{absent[0]}`")
                    yield number, tuple(row[c] for c in columns)
            except UnicodeDecodeError:
                raise self._not_utf8() from None

    def _parquet(self) -> Iterator[tuple[int, tuple[Any, ...]]]:
        try:
            import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise TableError(
                f"{self.path}: reading a Parquet table needs pyarrow, which is not installed "
                "(`pip install 'privilog[parquet]'`), or write the table as CSV or JSON lines"
            ) from None
        self._check()
        try:
            names = pq.read_schema(self.path).names
            if any(c not in names for c in self.columns):
                raise self._missing(list(names))
            table = pq.read_table(self.path, columns=list(self.columns))
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise TableError(f"{self.path}: cannot read the {self.table} table as Parquet: {error}") from None
        values = [table.column(c).to_pylist() for c in self.columns]
        yield from enumerate(zip(*values, strict=True), start=1)


FACT_FORMATS = {".csv": "csv", ".jsonl": "json", ".ndjson": "json"}
FACTS_FOLDER = "facts"


def fact_tables(folder: Path) -> dict[str, tuple[Path, str]]:
    """The files of a world's ``facts`` folder: each relation's file and its format (csv, json)."""
    found: dict[str, tuple[Path, str]] = {}
    for entry in sorted(folder.iterdir()):
        relation, dot, suffix = entry.name.rpartition(".")
        fmt = FACT_FORMATS.get(f".{suffix.lower()}") if dot else None
        if entry.name.startswith((".", "_")):
            continue
        if fmt is None or not entry.is_file():
            raise TableError(
                f"{entry}: the facts folder holds one file a relation, RELATION.csv or RELATION.jsonl "
                "(such as ranger_item.csv)"
            )
        if relation in found:
            raise TableError(f"{folder}: the facts of `{relation}` are written twice ({found[relation][0].name}, "
                             f"{entry.name})")
        found[relation] = (entry, fmt)
    return found


def fact_rows(path: Path, fmt: str) -> Iterator[tuple[int, list[Any]]]:
    """Each row of one relation's facts, with its line: a CSV row without a header (every row as wide
    as the first), or a JSON list a line."""
    table = TableFile(FACTS_FOLDER, path, "csv" if fmt == "csv" else "json")
    with table._open() as file:
        try:
            if fmt == "csv":
                reader = csv.reader(file, strict=True)
                width, line = -1, reader.line_num
                for row in reader:
                    start, line = line + 1, reader.line_num
                    if not row:
                        continue
                    if width >= 0 and len(row) != width:
                        raise table.fail(
                            start, f"a row of {len(row)} values where the first had {width}: {','.join(row)}"
                        )
                    width = len(row)
                    yield start, row
                return
            decode = json.JSONDecoder().decode
            for number, text in enumerate(file, start=1):
                if not text.strip():
                    continue
                try:
                    row = decode(text.rstrip("\r\n"))
                except ValueError as error:
                    problem = str(error).partition(":")[0]
                    column = getattr(error, "colno", 0)
                    raise TableError(f"{path}:{number}:{column}: not valid JSON: {problem}") from None
                if not isinstance(row, list):
                    raise table.fail(number, 'a row of facts is a JSON list of text, such as ["policy 12", "allow"]')
                yield number, row
        except csv.Error as error:
            raise TableError(f"{path}: not valid CSV: {error}") from None
        except UnicodeDecodeError:
            raise table._not_utf8() from None


def find_tables(path: Path) -> list[TableFile]:
    """The table files of a world: a folder of tables, or one table file named after its table.

    A table is ``TABLE.csv``, ``TABLE.jsonl`` (``.json``, ``.ndjson``) or
    ``TABLE.parquet`` in the folder, or a folder ``TABLE`` (or ``TABLE.csv``, ...)
    of part files, as Spark writes them. Other files (``requests``) are not the world's.
    """
    if not path.is_dir():
        table = path.name.partition(".")[0]
        if table not in WORLD_TABLES:
            raise TableError(
                f"{path}: a world table is named after its table ({', '.join(WORLD_TABLES)}), such as grants.csv"
            )
        return [TableFile(table, path, TABLE_FORMATS[path.suffix.lower()])]
    found: dict[str, list[TableFile]] = {}
    for entry in sorted(path.iterdir()):
        table, _, suffix = entry.name.partition(".")
        if table not in WORLD_TABLES:
            continue
        fmt = TABLE_FORMATS.get(f".{suffix.lower()}") if suffix else None
        if entry.is_dir():
            parts = [p for p in sorted(entry.iterdir()) if p.is_file() and not p.name.startswith((".", "_"))]
            fmt = fmt or _parts_format(parts)
            files = [TableFile(table, p, fmt) for p in parts]
        elif fmt is not None:
            files = [TableFile(table, entry, fmt)]
        else:
            continue
        if table in found:
            raise TableError(f"{path}: the {table} table is written twice ({found[table][0].path.name}, {entry.name})")
        found[table] = files
    if not found and not (path / FACTS_FOLDER).is_dir():
        raise TableError(
            f"{path}: no world tables here; a world folder holds entities, grants, members and admins tables "
            "(such as grants.csv, grants.jsonl or grants.parquet)"
        )
    return [f for table in WORLD_TABLES for f in found.get(table, [])]


def _parts_format(parts: list[Path]) -> str:
    """The format of a folder of part files, as ``privilog pipeline`` infers it."""
    names = [p.name.lower() for p in parts]
    for fmt, suffixes in (("csv", (".csv",)), ("json", (".json", ".jsonl", ".ndjson"))):
        if names and all(n.endswith(suffixes) for n in names):
            return fmt
    return "parquet"


def is_table_path(path: Path) -> bool:
    """Whether ``path`` names a world of tables rather than a YAML or JSON document.

    A folder, or a file ending ``.csv``, ``.jsonl``, ``.ndjson`` or ``.parquet``
    (a ``.json`` file alone is a JSON world document).
    """
    return path.is_dir() or path.suffix.lower() in (".csv", ".jsonl", ".ndjson", ".parquet")
