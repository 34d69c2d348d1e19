"""``privilog verify-log``: a decision log checked against the store, line by line.

Two checks. The chain: each line's ``mac`` (HMAC-SHA256 keyed by the store's secret, over the
previous line's ``mac`` of its stream and the line's canonical JSON) and its counter ``n``, one more
than the last within its stream; so a line edited, removed from the middle, repeated or moved is
found. The decisions: every line (or a sample) decided again as of its revision, the result and the
reason compared. One deployment per policy version is rolled forward through the store's log in
entry order (``Deployment(at=...)``, ``catch_up(until=...)``: the server's own replay), so a log of a
million lines costs one world's load and one pass over the log, not an authorizer per moment.

Exit 0 when every line agrees, 1 when any differs (each named FILE:LINE), 2 for bad usage or a
file or store that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from privilog.cli.store import STORE_HELP, store_url
from privilog.usage import EXIT_DENY, EXIT_OK, UsageError

FIELDS = ("request", "result", "endpoint", "policy_version", "stream", "n", "mac")
SHOWN = 3  # differing fields named per line, at most


@dataclass
class Entry:
    """One line of the log, parsed."""

    line: int
    data: dict[str, Any]
    text: str


@dataclass
class Findings:
    """What the run found: each finding is a line number (0: the file) and what."""

    path: str
    found: list[tuple[int, str]] = field(default_factory=list)
    entries: int = 0
    checked: int = 0
    differing: set[int] = field(default_factory=set)

    def add(self, line: int, what: str) -> None:
        self.found.append((line, what))
        self.differing.add(line)


def _sample(text: str | None) -> float | int | None:
    if text is None:
        return None
    try:
        if any(c in text for c in ".eE"):
            fraction = float(text)
            if 0.0 < fraction <= 1.0:
                return fraction
        else:
            count = int(text)
            if count >= 1:
                return count
    except ValueError:
        pass
    raise UsageError(
        f"privilog verify-log: --sample is a count of lines (1 or more) or a fraction like 0.1, not {text!r}"
    )


def read_entries(path: str, findings: Findings) -> list[Entry]:
    """The lines of the log that are decision lines; every other non-empty line is a finding."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8"
        raise UsageError(f"privilog verify-log: cannot read {path}: {reason}") from None
    entries = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except ValueError:
            findings.add(number, "not a JSON line")
            continue
        missing = [f for f in FIELDS if not isinstance(data, dict) or f not in data]
        if missing:
            findings.add(number, f"not a decision log line with a chain (no {', '.join(missing)})")
            continue
        entries.append(Entry(number, data, text))
    findings.entries = len(entries)
    return entries


def check_chain(entries: list[Entry], key: bytes, findings: Findings) -> int:
    """Each stream's counters and MACs (over each line's text up to its ``mac``), in file order; the
    number of streams."""
    from privilog.serve.decisionlog import mac_of, split_mac

    last: dict[str, tuple[int, str]] = {}  # stream -> (n, mac) of its last line
    for entry in entries:
        stream, n = entry.data["stream"], entry.data["n"]
        body, mac = split_mac(entry.text)
        before = last.get(str(stream))
        expected = 1 if before is None else before[0] + 1
        if not isinstance(n, int) or n != expected:
            if before is None:
                findings.add(entry.line, f"stream {stream} starts at n={n}: its lines before are not in the file")
            elif isinstance(n, int) and n > expected:
                findings.add(entry.line, f"n={n} follows n={before[0]} of stream {stream}: lines removed before it")
            else:
                findings.add(entry.line, f"n={n} after n={before[0]} of stream {stream}: a line repeated or moved")
        elif mac is None or mac != entry.data["mac"] or mac != mac_of(key, before[1] if before else "", body):
            findings.add(entry.line, "mac does not match: the line was edited (or signed with another store's key)")
        last[str(stream)] = (n if isinstance(n, int) else expected, str(entry.data["mac"]))
    return len(last)


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k in sorted(value):
            yield from _flat(value[k], f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        yield f"{prefix}.length", len(value)
        for i, v in enumerate(value):
            yield from _flat(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def differences(logged: Any, decided: Any) -> list[str]:
    """The fields of two reasons that differ, as `field (logged X, re-decided Y)`."""
    a, b = dict(_flat(logged)), dict(_flat(decided))
    out = []
    for name in sorted(set(a) | set(b), key=lambda n: (n.count("."), n)):
        if a.get(name, "absent") != b.get(name, "absent"):
            out.append(f"reason.{name} (logged {json.dumps(a.get(name))}, re-decided {json.dumps(b.get(name))})")
    return out


class Redecider:
    """Deployments at the log's revisions, one per policy version, rolled forward in entry order."""

    def __init__(self, store: Any, given: Any, backend: str):
        from privilog.store.revision import policy_version

        self.store = store
        self.given = given
        self.given_version = policy_version(given)
        self.backend = backend
        self.deployments: dict[str, Any] = {}
        self.texts: dict[str, dict[str, str]] = {}

    def _policy(self, version: str, policy_seq: int) -> Any:
        if version == self.given_version:
            return self.given
        from privilog import dsl

        record = self.store.policy_at(policy_seq) if policy_seq else None
        if record is None or record.version != version:
            raise LookupError(f"policy version {version} is not recorded in the store at entry {policy_seq}")
        where = f"<policy {record.name} version {record.version}>"
        return dsl.parse_policy(record.text, where, include_prelude=False)

    def at(self, seq: int, version: str, policy_seq: int) -> Any:
        """The deployment of ``version`` brought to entry ``seq`` (entries come in order)."""
        from privilog.serve.decisionlog import requirement_texts
        from privilog.store.deployment import Deployment

        deployment = self.deployments.get(version)
        if deployment is None or deployment.seq > seq:
            policy = self._policy(version, policy_seq)
            deployment = Deployment(self.store, policy, self.backend, track_grants=True, at=seq)
            self.deployments[version] = deployment
            self.texts[version] = requirement_texts(policy)
        elif deployment.seq < seq:
            deployment.catch_up(until=seq)
        return deployment

    def decide(self, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The result and the reason of a logged line's request, decided again at its revision."""
        from privilog.serve.decisionlog import reason_of
        from privilog.store.revision import parse_revision

        revision = parse_revision(data.get("revision"))
        if data.get("seq") != revision.seq or data["policy_version"] != revision.policy_version:
            raise LookupError(f"its seq and policy_version are not its revision's ({revision.seq}, "
                              f"{revision.policy_version})")
        deployment = self.at(revision.seq, revision.policy_version, revision.policy_seq)
        if deployment.seq != revision.seq:
            raise LookupError(f"the store's log ends at entry {deployment.seq}, before the line's {revision.seq}")
        request = data["request"]
        authorizer = deployment.authorizer
        if data["endpoint"] == "enforce":
            query = authorizer.backend.query
            missing = [a for a in request["actions"]
                       if not query("holds", {0: request["principal"], 1: a, 2: request["entity"]})]
            return ("deny" if missing else "allow"), {"missing": missing}
        if request.get("operation") is None:  # isVisible of a type without a listing operation
            return "deny", {"unmet": [], "denied_by": []}
        row = authorizer.tabled(request["principal"], request["operation"], request["entity"], request.get("args"))
        return row.decision, reason_of(row, deployment.granted, self.texts[revision.policy_version])


def verify(args: argparse.Namespace) -> tuple[Findings, dict[str, Any]]:
    from privilog import dsl
    from privilog.engine.authorizer import RequestError
    from privilog.serve.decisionlog import KEY_NAME
    from privilog.store import open_store
    from privilog.store.base import StoreError

    sample = _sample(args.sample)
    findings = Findings(args.file)
    entries = read_entries(args.file, findings)
    policy = dsl.load_policy(args.policy)
    store = open_store(str(store_url(args)), policy.actions, create=False)
    try:
        streams = check_chain(entries, store.secret(KEY_NAME).encode(), findings)
        chosen = [e for e in entries if isinstance(e.data.get("request"), dict)]
        if isinstance(sample, float):
            chosen = [e for e in chosen if random.random() < sample]
        elif isinstance(sample, int) and sample < len(chosen):
            chosen = sorted(random.sample(chosen, sample), key=lambda e: e.line)
        order = sorted(chosen, key=lambda e: (e.data.get("seq") if isinstance(e.data.get("seq"), int) else -1, e.line))
        redecider = Redecider(store, policy, args.backend)
        tty = sys.stderr.isatty()
        for done, entry in enumerate(order, start=1):
            if tty and (done % 500 == 0 or done == len(order)):
                print(f"\rprivilog verify-log: re-decided {done} of {len(order)}", end="", file=sys.stderr, flush=True)
            findings.checked += 1
            data = entry.data
            try:
                result, reason = redecider.decide(data)
            except (LookupError, StoreError, RequestError, KeyError, TypeError) as error:
                text = str(error).splitlines()[0] if str(error) else type(error).__name__
                findings.add(entry.line, f"cannot be decided again: {text}")
                continue
            whats = []
            if data["result"] != result:
                whats.append(f"result (logged {data['result']}, re-decided {result})")
            if "reason" in data:
                whats.extend(differences(data["reason"], reason))
            if whats:
                more = f"; and {len(whats) - SHOWN} more" if len(whats) > SHOWN else ""
                findings.add(entry.line, "; ".join(whats[:SHOWN]) + more)
        if tty and order:
            print(file=sys.stderr)
    finally:
        store.close()
    summary = {
        "file": args.file,
        "entries": findings.entries,
        "streams": streams,
        "checked": findings.checked,
        "sampled": sample is not None,
        "differing": len(findings.differing),
    }
    return findings, summary


def cmd_verify_log(args: argparse.Namespace) -> int:
    findings, summary = verify(args)
    found = sorted(findings.found)
    if args.json:
        out = {**summary, "findings": [{"line": line, "what": what} for line, what in found]}
        print(json.dumps(out, indent=2))
    else:
        for line, what in found:
            print(f"{findings.path}:{line}: {what}")
        differing = summary["differing"]
        agreed = "every line agrees" if not found else f"{differing} line{'s differ' if differing > 1 else ' differs'}"
        sampled = " (a sample)" if summary["sampled"] else ""
        print(
            f"{summary['entries']} entries in {summary['streams']} streams, chain checked; "
            f"{summary['checked']} re-decided{sampled}; {agreed}"
        )
    return EXIT_DENY if found else EXIT_OK


def register(sub: Any) -> None:
    """Add ``verify-log`` to the command line's subparsers."""
    text = "check a decision log against the store: its HMAC chain, and each decision made again as of its revision"
    p = sub.add_parser("verify-log", help=text, description=text + "; exit 1 when any line differs, naming it.")
    p.add_argument("file", metavar="FILE", help="a decision log (privilog serve --decision-log FILE)")
    p.add_argument("--store", help=STORE_HELP + "; its secret keys the log's HMACs")
    p.add_argument("--policy", default="cdap", help="the policy served (default cdap); others are read from the store")
    p.add_argument("--backend", default="compiled", help="the engine's backend (default compiled)")
    p.add_argument("--sample", metavar="N|FRACTION", help="re-decide only N lines, or this fraction, at random")
    p.add_argument("--json", action="store_true", help="the findings and the summary as JSON")
    p.set_defaults(run=cmd_verify_log)

