"""Policy text to checked IR: parse, lower, resolve includes, check.

>>> policy = parse_policy('''
... actions READ
... entity namespace
... namespace:
...   get requires READ
... ''', include_prelude=False)
>>> policy.operation("namespace.get").requirements[0].options[0].actions
('READ',)
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from privilog.dsl import cache
from privilog.dsl.check import check
from privilog.dsl.errors import OneLineError, PolicyError, PolicyErrors, PrivilogError
from privilog.dsl.files import read_policy_text
from privilog.dsl.format import format_policy, format_text
from privilog.dsl.ir import Policy

__all__ = [
    "PRELUDE",
    "NotAPolicy",
    "Policy",
    "PolicyError",
    "PolicyErrors",
    "PrivilogError",
    "format_policy",
    "format_text",
    "load_policy",
    "not_a_policy",
    "parse_policy",
    "parse_unchecked",
    "resolve_policy_path",
    "rules_dir",
    "starts_like_a_policy",
]

PRELUDE = "prelude/requirements"


def rules_dir() -> Path:
    """The folder of policies shipped with privilog."""
    from privilog import rules

    return Path(rules.__file__).parent


def resolve_policy_path(name: str, relative_to: Path | None = None) -> Path:
    """A policy named by path, or by name in ``rules/`` (``cdap`` is ``rules/cdap.policy``)."""
    candidates = []
    path = Path(name)
    if relative_to is not None and not path.is_absolute():
        candidates += [relative_to / name, relative_to / f"{name}.policy"]
    candidates += [path, Path(f"{name}.policy"), rules_dir() / name, rules_dir() / f"{name}.policy"]
    for candidate in candidates:
        if _is_file(candidate):
            return candidate
    shipped = sorted(p.stem for p in rules_dir().glob("*.policy"))
    raise OneLineError(f"no policy `{name}`: not a file, and not one of the shipped policies ({', '.join(shipped)})")


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the system refuses (too long, a NUL in it) is not one."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def parse_unchecked(text: str, file: str = "<policy>") -> Policy:
    """Parse and lower one source, without its includes and without checks."""
    from privilog.dsl.lower import lower  # Lark, imported only when a policy is parsed (not read from the cache)
    from privilog.dsl.parser import parse_tree

    try:
        return lower(parse_tree(text, file), file, _default_name(file))
    except (PolicyError, PolicyErrors) as error:
        raise error.with_source(text) from None


class NotAPolicy(OneLineError):
    """A file given as a policy that does not even start like one (``--policy /etc/passwd``)."""

    located = True


_COMMENT_OR_BLANK = re.compile(r"(?:[ \t\r\f\v]*(?:#[^\n]*)?\n)*[ \t\r\f\v]*")


# The words a policy's first statement starts with: `policy`, or, in a policy without that
# line (named after its file), a declaration.
_FIRST_WORDS = re.compile(r"(?:policy|include|actions|set|entity|relation|property)\b")


def starts_like_a_policy(text: str) -> bool:
    r"""Whether the first thing in ``text`` after comments and blank lines is ``policy`` (or,
    in a policy without that line, a declaration such as ``actions``).

    >>> starts_like_a_policy("# mine\n\npolicy p"), starts_like_a_policy("root:x:0:0:root:/root:/bin/bash")
    (True, False)
    """
    text = text.removeprefix("\ufeff")
    start = _COMMENT_OR_BLANK.match(text).end()  # type: ignore[union-attr]
    return _FIRST_WORDS.match(text, start) is not None


def not_a_policy(path: Path | str) -> NotAPolicy:
    return NotAPolicy(
        f"{path}: not a policy: it does not start with `policy NAME` (or a declaration) and does not parse "
        "(its content is not shown)"
    )


def parse_file_text(text: str, path: Path | str) -> Policy:
    """:func:`parse_unchecked` for a file's text; a file that neither parses nor starts like a
    policy is :class:`NotAPolicy`, without echoing its content (it may be any file at all)."""
    try:
        return parse_unchecked(text, str(path))
    except (PolicyError, PolicyErrors):
        if not starts_like_a_policy(text):
            raise not_a_policy(path) from None
        raise


_POLICY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*([.\-][A-Za-z0-9_]+)*\Z")  # as dsl/policy.lark writes one


def _default_name(file: str) -> str:
    """A policy without a `policy` line is named after its file, as written where the language
    can write it (a `policy` line may name `cdap-4.2`), else with the other characters as `_`.

    >>> _default_name("<policy>"), _default_name("rules/cdap-4.2.policy"), _default_name("my policy.policy")
    ('policy', 'cdap-4.2', 'my_policy')
    """
    stem = Path(file).stem
    if _POLICY_NAME.match(stem):
        return stem
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem).strip("_") or "policy"
    return f"_{name}" if name[0].isdigit() else name


def _merge(main: Policy, included: list[Policy]) -> Policy:
    parts = [*included, main]
    return replace(
        main,
        actions=tuple(a for p in parts for a in p.actions),
        action_sets=tuple(s for p in parts for s in p.action_sets),
        entity_types=tuple(t for p in parts for t in p.entity_types),
        relations=tuple(r for p in parts for r in p.relations),
        operations=tuple(o for p in parts for o in p.operations),
        rules=tuple(r for p in parts for r in p.rules),
        properties=tuple(q for p in parts for q in p.properties),
    )


def _with_includes(
    policy: Policy,
    base: Path | None,
    seen: tuple[str, ...],
    include_prelude: bool,
    read: list[cache.Include] | None = None,
) -> Policy:
    """``policy`` with what it includes merged in; ``read``, when given, gets each file included."""
    names = list(policy.includes)
    if include_prelude and PRELUDE not in names:
        names.insert(0, PRELUDE)
    included = []
    for name in names:
        path = resolve_policy_path(name, base)
        key = str(path.resolve())
        if key in seen:
            raise PolicyError(f"`{name}` includes itself", policy.span)
        text = read_policy_text(path, "included policy")
        if read is not None:
            read.append(cache.Include(name, None if base is None else str(base), str(path), cache.digest(text)))
        child = parse_file_text(text, path)
        included.append(_with_includes(child, path.parent, (*seen, key), include_prelude=False, read=read))
    return _merge(policy, included)


def parse_policy(text: str, file: str = "<policy>", include_prelude: bool = True) -> Policy:
    """Parse, resolve includes (and the requirement semantics of the prelude) and check."""
    unchecked = parse_unchecked(text, file)
    base = Path(file).parent if file != "<policy>" else None
    merged = _with_includes(unchecked, base, (), include_prelude)
    try:
        return check(merged)
    except (PolicyError, PolicyErrors) as error:
        raise _with_sources(error, {file: text}) from None


def _with_sources(error: PolicyError | PolicyErrors, known: dict[str, str]) -> PolicyError | PolicyErrors:
    """Attach each error's own source line (errors may lie in included files).

    ``known`` maps a file name to its text, for sources that are not files (or not yet saved).
    """

    def one(e: PolicyError) -> PolicyError:
        if e.span.file in known:
            return e.with_source(known[e.span.file])
        try:
            return e.with_source(Path(e.span.file).read_text(encoding="utf-8"))
        except OSError:
            return e

    if isinstance(error, PolicyErrors):
        return PolicyErrors([one(e) for e in error.errors])
    return one(error)


def load_policy(name: str) -> Policy:
    """Load a checked policy by path or by its name in ``rules/`` (from the user's cache when neither it,
    nor what it includes, nor privilog changed: :mod:`privilog.dsl.cache`)."""
    path = resolve_policy_path(name)
    text = read_policy_text(path)
    entry_name = cache.key(str(path), str(path.resolve()), text)
    entry = cache.load(entry_name)
    if entry is not None and _unchanged(entry.includes):
        return entry.policy
    unchecked = parse_file_text(text, path)
    read: list[cache.Include] = []
    merged = _with_includes(unchecked, path.parent, (str(path.resolve()),), include_prelude=True, read=read)
    try:
        checked = check(merged)
    except (PolicyError, PolicyErrors) as error:
        raise _with_sources(error, {str(path): text}) from None
    cache.store(entry_name, cache.Entry(checked, tuple(read)))
    return checked


def _unchanged(includes: tuple[cache.Include, ...]) -> bool:
    """Whether each file a cached policy included still resolves to the same file, with the same text."""
    for include in includes:
        try:
            path = resolve_policy_path(include.name, None if include.base is None else Path(include.base))
            if str(path) != include.path or cache.digest(read_policy_text(path, "included policy")) != include.digest:
                return False
        except PrivilogError:
            return False
    return True
