"""The store over SQL, for any database with a DB-API driver: the statements, in one place.

:class:`SqlStore` is the whole store written once; a dialect
(:mod:`privilog.store.sqlite`, :mod:`privilog.store.postgres`) says how to
connect, how to take the write lock, and the few words that differ. Statements
are written with ``?`` placeholders; a dialect whose driver wants ``%s`` gets
them rewritten once.

Tables (schema version 2):

* ``meta(key, value)``: ``schema_version``, ``instance``, ``secret:NAME`` (:meth:`SqlStore.secret`);
* ``entities(entity, top)``: the entities listed as existing, with their namespace
  (or themselves, at the top) so a delete reads only its own namespace;
* ``grants(principal, action, entity)``, ``members(member, grp)``,
  ``admins(principal)``, ``roles(role)``;
* ``tokens(token_id, digest, principal, created, revoked)``;
* ``changes(seq, at, actor, kind, items, asked, request_id, outcome, effect)``: the
  audit log and the change log in one, append-only (triggers refuse updates
  and deletes where the database has them). ``effect`` holds what a change did that
  its items do not say (the entities a delete took with it, the rows a role's drop
  removed, the rows an import added, a checkpoint's whole world), so that the log
  replayed from its start (or its checkpoint) gives the store at any entry;
* ``policies(version, name, source)``: each policy a ``policy.use`` entry names,
  in canonical text (version 2);
* ``grants.since``: the log entry that made each grant (version 2).

The module is over 600 lines because it is the one place the store's SQL is written: the
statements beside the transactions that run them, which a split would put in two files.
"""

from __future__ import annotations

import json
import secrets
import threading
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from functools import cache
from typing import Any

from privilog.dsl.limits import Limit
from privilog.engine.ids import DEFAULT_INSTANCE, EntityId, IdError, parent_type
from privilog.engine.world import NotAnAdmin, World, world_from_data

from .base import (
    CHECKPOINT,
    IMPORT,
    KINDS,
    MAX_ITEMS,
    POLICY_USE,
    SCHEMA_VERSION,
    BatchRefused,
    Change,
    History,
    PolicyRecord,
    Store,
    StoreError,
    Token,
    check_items,
    facts_refusal,
    new_token,
    now,
    refusal,
    secret_matches,
    split_token,
)
from .revision import Revision

_IS_ADMIN = """
WITH RECURSIVE g(p) AS (SELECT ? UNION SELECT m.grp FROM members m JOIN g ON m.member = g.p)
SELECT 1 FROM admins WHERE principal IN (SELECT p FROM g) LIMIT 1
"""

# where a role's rows are (table, the condition on the role): what role.drop finds and deletes
_ROLE_ROWS = (
    ("roles", "role = ?"),
    ("members", "grp = ? OR member = ?"),
    ("grants", "principal = ?"),
    ("admins", "principal = ?"),
)

# kind -> (table, its columns): the kinds that add or remove rows of one table
_ROWS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "grant": ("grants", ("principal", "action", "entity"), True),
    "revoke": ("grants", ("principal", "action", "entity"), False),
    "member.add": ("members", ("member", "grp"), True),
    "member.remove": ("members", ("member", "grp"), False),
    "admin.add": ("admins", ("principal",), True),
    "admin.remove": ("admins", ("principal",), False),
    "role.create": ("roles", ("role",), True),
}

# How long a store waits for its write lock (another writer's transaction) or for one statement before
# it gives up: the request answers 503 (StoreUnavailable) instead of hanging while the database is
# locked or not answering. SQLite's busy timeout; PostgreSQL's lock_timeout and statement_timeout.
STORE_TIMEOUT = Limit("PRIVILOG_STORE_TIMEOUT", 10, "seconds")

_CHANGE_COLUMNS = "seq, at, actor, kind, items, asked, request_id, outcome"
_REPLAYED = "SELECT seq, at, kind, items, effect FROM changes WHERE seq > ? AND seq <= ? AND outcome = 'applied'"

# Schema version 1, written once; a dialect fills in its words for a clustered key table
# (``keyed``) and an auto-increasing sequence number (``serial``), then adds its own guards
SCHEMA_V1 = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE entities(entity TEXT PRIMARY KEY, top TEXT NOT NULL)",
    "CREATE INDEX entities_top ON entities(top)",
    "CREATE TABLE grants(principal TEXT NOT NULL, action TEXT NOT NULL, entity TEXT NOT NULL,"
    " PRIMARY KEY(principal, action, entity)){keyed}",
    "CREATE TABLE members(member TEXT NOT NULL, grp TEXT NOT NULL, PRIMARY KEY(member, grp)){keyed}",
    "CREATE INDEX members_grp ON members(grp)",
    "CREATE TABLE admins(principal TEXT PRIMARY KEY)",
    "CREATE TABLE roles(role TEXT PRIMARY KEY)",
    "CREATE TABLE tokens(token_id TEXT PRIMARY KEY, digest TEXT NOT NULL, principal TEXT NOT NULL,"
    " created TEXT NOT NULL, revoked TEXT)",
    "CREATE TABLE changes(seq {serial}, at TEXT NOT NULL, actor TEXT NOT NULL,"
    " kind TEXT NOT NULL, items TEXT NOT NULL, asked TEXT NOT NULL, request_id TEXT NOT NULL,"
    " outcome TEXT NOT NULL)",
    "CREATE INDEX changes_at ON changes(at)",
)


def schema_v1(keyed: str, serial: str) -> list[str]:
    """Schema version 1 in a dialect's words (see :data:`SCHEMA_V1`)."""
    return [statement.format(keyed=keyed, serial=serial) for statement in SCHEMA_V1]


# the kinds whose log entries change the world a history replays (token and role.create entries do not)
_WORLD_KINDS = frozenset(
    {"grant", "revoke", "revoke.entity", "member.add", "member.remove", "entity.add", "entity.delete"}
    | {"admin.add", "admin.remove", "role.drop", IMPORT, CHECKPOINT}
)


class _Refusal(Exception):
    """A change refused inside its transaction (the one at ``index`` of its batch; None: the whole batch):
    raised to roll it back, then logged and re-raised."""

    def __init__(self, reason: str, error: Exception, index: int | None):
        super().__init__(reason)
        self.reason, self.error, self.index = reason, error, index


def top_of(entity: EntityId) -> str:
    """The namespace an entity lies in (or the entity itself, at the top): what a delete reads.

    >>> top_of(EntityId.parse("program:ns1.app.service.api")), top_of(EntityId.parse("namespace:ns1"))
    ('namespace:ns1', 'namespace:ns1')
    """
    kind = entity.type
    if kind != "namespace" and _in_namespace(kind):  # the namespace is the name's first part
        return "namespace:" + entity.name.partition(".")[0]
    ancestors = [a for a in entity.ancestors() if a.type != "instance"]
    return str(ancestors[-1] if ancestors else entity)


@cache
def _in_namespace(kind: str) -> bool:
    while kind is not None and kind != "namespace":
        kind = parent_type(kind)  # type: ignore[assignment]
    return kind == "namespace"


class SqlStore(Store):
    """The store, over a DB-API connection the dialect opens."""

    placeholder = "?"
    contains = "instr"  # the function f(haystack, needle) > 0

    def __init__(self, url: str, actions: Iterable[str] = ()):
        self.url = url
        self.actions = tuple(actions)
        # Two connections, each behind its own lock (the server calls from several threads): one writes,
        # one reads (opened on the first read), so a change waiting for the write lock, up to the
        # timeout, holds up no reader (a token looked up, the log followed): SQLite's WAL and
        # PostgreSQL read while another writes.
        self._lock = threading.RLock()
        self._read_lock = threading.RLock()
        self._reader: Any = None
        self._closed = False  # by close(): no connection is opened again
        self._conn = self._connect()
        try:
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    # ---- what a dialect provides ----------------------------------------------------------

    @abstractmethod
    def _connect(self) -> Any:
        """A DB-API connection in autocommit mode (transactions are begun explicitly)."""

    @abstractmethod
    def _schema(self) -> list[str]:
        """The statements creating schema version 1."""

    @abstractmethod
    def _begin_write(self, cur: Any) -> None:
        """Begin a transaction that holds the store's one write lock until it ends."""

    def _begin_read(self, cur: Any) -> None:
        cur.execute("BEGIN")

    def _unbounded(self, cur: Any) -> None:
        """Inside a transaction that reads or writes a whole store (a snapshot, an import): lift the bound on
        one statement's time (PostgreSQL's ``statement_timeout``) for this transaction only."""

    def _after_change(self, cur: Any, seq: int) -> None:
        """Inside the change's transaction, after it is logged (PostgreSQL notifies replicas)."""

    # ---- plumbing ---------------------------------------------------------------------------

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def _classify(self, error: Exception) -> StoreError | None:
        """What a driver's error means to a caller: :class:`StoreUnavailable` (the database away,
        locked, unreadable or too slow: 503, try again), :class:`StoreFull` (no room: 507), or None
        for an error that is not the store's (raised as it is)."""
        return None

    def _connection(self, write: bool) -> Any:
        """The connection for a write (the one :meth:`_connect` made first) or a read (opened on first use);
        called holding that connection's lock."""
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        if write:
            return self._conn
        if self._reader is None:
            self._reader = self._connect()
        return self._reader

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:
        """One transaction, on the writing or the reading connection, committed when the block ends and
        rolled back when it raises. A driver's error on the way (connecting, begin, a statement, the
        commit) is raised as the dialect classifies it (:meth:`_classify`): nothing half made, and the
        connection left usable."""
        with self._lock if write else self._read_lock:
            try:
                conn = self._connection(write)
                with self._watch(conn):
                    cur = conn.cursor()
                    try:
                        (self._begin_write if write else self._begin_read)(cur)
                        yield cur
                        cur.execute("COMMIT")
                    except BaseException:
                        self._rollback(cur)
                        raise
                    finally:
                        cur.close()
            except Exception as error:
                classified = self._classify(error)
                if classified is None:
                    raise
                raise classified from None

    def _watch(self, conn: Any) -> AbstractContextManager[None]:
        """Around each transaction on ``conn``: where a database can stop answering altogether (a server
        frozen, a network gone), the dialect bounds the transaction's time here."""
        return nullcontext()

    def _rollback(self, cur: Any) -> None:
        """Roll back whatever is open; a connection that broke (or a transaction the database ended
        itself, as SQLite does on some errors) has nothing to roll back, and the first error stands."""
        with suppress(Exception):  # the error being raised is the one to report
            cur.execute("ROLLBACK")

    def _one(self, cur: Any, statement: str, params: tuple[Any, ...] = ()) -> Any:
        cur.execute(self._sql(statement), params)
        row = cur.fetchone()
        return None if row is None else row[0]

    def _migrate(self) -> None:
        with self._transaction(write=True) as cur:
            if not self._has_table(cur, "meta"):
                for statement in self._schema():
                    cur.execute(statement)
                cur.execute(self._sql("INSERT INTO meta(key, value) VALUES (?, ?)"), ("schema_version", "1"))
                cur.execute(self._sql("INSERT INTO meta(key, value) VALUES (?, ?)"), ("instance", DEFAULT_INSTANCE))
            version = int(self._one(cur, "SELECT value FROM meta WHERE key = ?", ("schema_version",)) or 0)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.url}: the store's schema is version {version}, newer than this privilog's "
                    f"({SCHEMA_VERSION}); upgrade privilog"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    cur.execute(self._sql(statement))
                if step == 2:
                    self._checkpoint(cur)
                cur.execute(self._sql("UPDATE meta SET value = ? WHERE key = ?"), (str(step), "schema_version"))

    def _checkpoint(self, cur: Any) -> None:
        """Upgrading to schema 2: a store that holds anything gets a ``checkpoint`` entry, its whole world,
        where its history starts (its older entries do not say all they did); each grant dates from it."""
        head = int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes"))
        if not head:
            return
        self._unbounded(cur)
        world = self._now(cur, head, granted=False).world
        entry = self._log(
            cur, "local:upgrade", CHECKPOINT, (), (), "", "applied", {"instance": world.instance, **_rows_of(world)}
        )
        cur.execute(self._sql("UPDATE grants SET since = ?"), (entry.seq,))
        cur.execute(self._sql("INSERT INTO meta(key, value) VALUES (?, ?)"), ("history_from", str(entry.seq)))

    @abstractmethod
    def _has_table(self, cur: Any, name: str) -> bool: ...

    def _is_admin(self, cur: Any, principal: str) -> bool:
        return self._one(cur, _IS_ADMIN, (principal,)) is not None

    def _log(
        self,
        cur: Any,
        actor: str,
        kind: str,
        items: tuple[Any, ...],
        asked: tuple[Any, ...],
        request_id: str,
        outcome: str,
        effect: Any = None,
        policy: tuple[int, str] | None = None,
    ) -> Change:
        """Append one entry; ``policy``: the policy in force (its entry and version, :meth:`_policy_in_force`)
        for an applied change's revision."""
        at = now()
        cur.execute(
            self._sql(
                "INSERT INTO changes(at, actor, kind, items, asked, request_id, outcome, effect) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"
            ),
            (
                at,
                actor,
                kind,
                json.dumps(items),
                json.dumps(asked),
                request_id,
                outcome,
                None if effect is None else json.dumps(effect),
            ),
        )
        seq = int(cur.fetchone()[0])
        revision = ""
        if outcome == "applied":
            self._after_change(cur, seq)
            if policy is not None:
                revision = Revision(seq, *policy).token
        return Change(seq, at, actor, kind, items, asked, request_id, outcome, revision)

    def _policy_in_force(self, cur: Any, seq: int | None = None) -> tuple[int, str]:
        """The ``policy.use`` entry in force at ``seq`` (None: the last) and its version; (0, "") for none."""
        bound = "" if seq is None else " AND seq <= ?"
        cur.execute(
            self._sql(f"SELECT seq, items FROM changes WHERE kind = ?{bound} ORDER BY seq DESC LIMIT 1"),
            (POLICY_USE,) if seq is None else (POLICY_USE, seq),
        )
        row = cur.fetchone()
        if row is None:
            return 0, ""
        return int(row[0]), str(json.loads(row[1])[0][1])

    def _refuse(
        self,
        actor: str,
        given: Sequence[tuple[str, Sequence[Any]]],
        checked: Sequence[tuple[Any, ...]],
        index: int | None,
        reason: str,
        request_id: str,
        raw: bool = False,
    ) -> None:
        """Log every change of a refused batch as refused, in one transaction, each bounded
        (:func:`~privilog.store.base.refusal`: its first items, and how many were asked with a digest of
        them all): the one at ``index`` (every one, for None) with ``reason``, the others as refused with
        it. A change's items are as checked, or as given (``raw``) for the malformed one and those after."""
        with self._transaction(write=True) as cur:
            for number, (kind, items) in enumerate(given):
                why = reason
                if index is not None and number != index:
                    why = f"not applied: change {index + 1} of its batch of {len(given)} was refused: {reason}"
                as_given = number >= len(checked) or (raw and number == index)
                kept, outcome = refusal(items if as_given else checked[number], why, as_given)
                self._log(cur, actor, kind, (), kept, request_id, outcome)

    # ---- changes ------------------------------------------------------------------------------

    def change(
        self, actor: str, kind: str, items: Iterable[Any], request_id: str = "", *, trusted: bool = False
    ) -> Change:
        try:
            return self.change_many(actor, [(kind, items)], request_id, trusted=trusted, strict=False)[0]
        except BatchRefused as refused:
            raise refused.error from None

    def change_many(
        self,
        actor: str,
        changes: Iterable[tuple[str, Iterable[Any]]],
        request_id: str = "",
        *,
        trusted: bool = False,
        strict: bool = True,
    ) -> list[Change]:
        if not isinstance(actor, str) or not actor or len(actor) > 512:
            raise StoreError("a change needs the principal making it (its actor)")
        given = [(kind, items if isinstance(items, list | tuple) else list(items)) for kind, items in changes]
        if len(given) > MAX_ITEMS:
            raise StoreError(f"a batch has at most {MAX_ITEMS} changes; import a world for more")
        checked: list[tuple[Any, ...]] = []
        for index, (kind, items) in enumerate(given):
            try:
                checked.append(check_items(kind, items, self.actions))
            except (StoreError, IdError) as error:
                if kind not in KINDS:  # an unknown kind is no change of the log's (the server refuses it before)
                    raise
                # Logged as refused, whoever asked: the reason is the malformation (what the caller is told),
                # before any admin check, since a malformed change is refused whoever makes it; a non-admin's
                # malformed change is logged under its actor all the same, so the log misses no change asked.
                self._refuse(actor, given, checked, index, str(error), request_id, raw=True)
                raise BatchRefused(index, error) from None
        try:
            with self._transaction(write=True) as cur:
                if not trusted and not self._is_admin(cur, actor):
                    admins = [r[0] for r in self._rows(cur, "SELECT principal FROM admins ORDER BY principal LIMIT 5")]
                    reason = f"{actor} is not an authorization admin"
                    what = f"a `{given[0][0]}` change" if len(given) == 1 else "these changes"
                    refused = NotAnAdmin(f"{reason}, so cannot make {what} (admins: {', '.join(admins) or 'none'})")
                    raise _Refusal(reason, refused, None)
                entries = []
                policy = self._policy_in_force(cur)
                for index, ((kind, _), asked) in enumerate(zip(given, checked, strict=True)):
                    try:
                        done, effect = self._apply(cur, kind, asked)
                        if strict and kind == "entity.delete" and len(done) < len(asked):
                            missing = next(a for a in asked if a not in done)
                            raise StoreError(f"no entity {missing} in the store: nothing to delete")
                    except StoreError as error:  # rolled back, then logged as refused
                        raise _Refusal(str(error), error, index) from None
                    entry = self._log(cur, actor, kind, done, asked, request_id, "applied", effect, policy)
                    if kind == "grant" and done:  # each new grant remembers the entry that made it
                        cur.executemany(
                            self._sql("UPDATE grants SET since = ? WHERE principal = ? AND action = ? AND entity = ?"),
                            [(entry.seq, *grant) for grant in done],
                        )
                    entries.append(entry)
                return entries
        except _Refusal as refusal:
            self._refuse(actor, given, checked, refusal.index, refusal.reason, request_id)
            raise BatchRefused(refusal.index, refusal.error) from None

    def _rows(self, cur: Any, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cur.execute(self._sql(statement), params)
        return [tuple(row) for row in cur.fetchall()]

    def _apply(self, cur: Any, kind: str, items: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any]:
        """Change the tables; return the items that changed something, and what else the change did that
        they do not say (the log's ``effect``; None for nothing)."""
        if kind in _ROWS:
            table, columns, adding = _ROWS[kind]
            where = " AND ".join(f"{c} = ?" for c in columns)
            done = []
            for item in items:
                row = item if isinstance(item, tuple) else (item,)
                present = self._one(cur, f"SELECT 1 FROM {table} WHERE {where}", row) is not None
                if present != adding:
                    done.append(item)
            if kind == "admin.remove":
                left = int(self._one(cur, "SELECT count(*) FROM admins")) - len(done)
                if done and left <= 0:
                    raise StoreError("that would leave no authorization admin; add another admin first")
            marks = ", ".join("?" for _ in columns)
            statement = (
                f"INSERT INTO {table}({', '.join(columns)}) VALUES ({marks})"
                if adding
                else f"DELETE FROM {table} WHERE {where}"
            )
            if done:
                cur.executemany(self._sql(statement), [d if isinstance(d, tuple) else (d,) for d in done])
            if kind == "member.add":  # a role someone joins exists
                for _, group in done:
                    if group.startswith("role:"):
                        self._insert_missing(cur, "roles", "role", group)
            return tuple(done), None
        if kind == "entity.add":
            done = []
            for text in items:
                if self._one(cur, "SELECT 1 FROM entities WHERE entity = ?", (text,)) is None:
                    cur.execute(
                        self._sql("INSERT INTO entities(entity, top) VALUES (?, ?)"),
                        (text, top_of(EntityId.parse(text))),
                    )
                    done.append(text)
            return tuple(done), None
        if kind == "entity.delete":
            done, gone = [], []
            for text in items:
                entity = EntityId.parse(text)
                doomed = [
                    row[0]
                    for row in self._rows(cur, "SELECT entity FROM entities WHERE top = ?", (top_of(entity),))
                    if row[0] == text or entity in EntityId.parse(row[0]).ancestors()
                ]
                if doomed:
                    cur.executemany(self._sql("DELETE FROM entities WHERE entity = ?"), [(d,) for d in doomed])
                    done.append(text)
                    gone += doomed
            return tuple(done), ({"entities": sorted(set(gone))} if gone else None)
        if kind == "revoke.entity":
            done = []
            for text in items:
                held = sorted(self._rows(cur, "SELECT principal, action, entity FROM grants WHERE entity = ?", (text,)))
                if held:
                    cur.execute(self._sql("DELETE FROM grants WHERE entity = ?"), (text,))
                    done += held
            return tuple(done), None
        if kind == "role.drop":
            # A dropped role leaves nothing under its name: its members, its own memberships, its grants
            # and its admin row go with it, so a role created later under that name starts with nothing
            # (whoever joins it is not an admin, nor in a group, through the old one).
            done = []
            removed: dict[str, list[Any]] = {"members": [], "grants": [], "admins": []}
            for role in items:
                rows = [(table, where, (role,) * where.count("?")) for table, where in _ROLE_ROWS]
                if any(self._one(cur, f"SELECT 1 FROM {t} WHERE {w} LIMIT 1", params) for t, w, params in rows):
                    removed["members"] += self._rows(
                        cur, "SELECT member, grp FROM members WHERE grp = ? OR member = ?", (role, role)
                    )
                    removed["grants"] += self._rows(
                        cur, "SELECT principal, action, entity FROM grants WHERE principal = ?", (role,)
                    )
                    removed["admins"] += [
                        r[0] for r in self._rows(cur, "SELECT principal FROM admins WHERE principal = ?", (role,))
                    ]
                    for table, where, params in rows:
                        cur.execute(self._sql(f"DELETE FROM {table} WHERE {where}"), params)
                    done.append(role)
            if done and self._one(cur, "SELECT 1 FROM admins LIMIT 1") is None:
                raise StoreError(
                    f"dropping {', '.join(done)} would leave no authorization admin; add another admin first"
                )
            return tuple(done), ({k: sorted(v) for k, v in removed.items()} if done else None)
        if kind == "token.create":
            raise StoreError("tokens are created with `privilog token create`, which shows the token once")
        if kind == "token.revoke":
            done = []
            for token_id in items:
                if self._one(cur, "SELECT 1 FROM tokens WHERE token_id = ? AND revoked IS NULL", (token_id,)):
                    cur.execute(self._sql("UPDATE tokens SET revoked = ? WHERE token_id = ?"), (now(), token_id))
                    done.append(token_id)
            return tuple(done), None
        raise StoreError(f"unknown change `{kind}`")  # pragma: no cover - check_items refused it

    def _insert_missing(self, cur: Any, table: str, column: str, value: str) -> None:
        if self._one(cur, f"SELECT 1 FROM {table} WHERE {column} = ?", (value,)) is None:
            cur.execute(self._sql(f"INSERT INTO {table}({column}) VALUES (?)"), (value,))

    # ---- reading --------------------------------------------------------------------------

    def snapshot(self) -> tuple[World, int]:
        history = self.history(None, granted=False)
        return history.world, history.seq

    def history(self, seq: int | None = None, granted: bool = True) -> History:
        """(``granted``: False leaves :attr:`History.granted` empty, for a reader that does not need it.)"""
        with self._transaction(write=False) as cur:
            self._unbounded(cur)  # a whole store (millions of rows) may take longer than a statement may
            head = int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes"))
            if seq is None or seq == head:
                return self._now(cur, head, granted)
            if not 0 <= seq <= head:
                raise StoreError(f"log entry {seq} is not in the store's log (its last entry is {head})")
            return self._replayed(cur, seq)

    def _now(self, cur: Any, head: int, granted: bool) -> History:
        data = {
            "instance": self._one(cur, "SELECT value FROM meta WHERE key = ?", ("instance",)),
            "entities": [r[0] for r in self._rows(cur, "SELECT entity FROM entities")],
            "grants": [list(r) for r in self._rows(cur, "SELECT principal, action, entity FROM grants")],
            "members": [list(r) for r in self._rows(cur, "SELECT member, grp FROM members")],
            "admins": [r[0] for r in self._rows(cur, "SELECT principal FROM admins")],
        }
        since: dict[tuple[str, str, str], int] = {}
        if granted:
            rows = self._rows(cur, "SELECT principal, action, entity, since FROM grants")
            since = {(p, a, e): int(n) for p, a, e, n in rows}
        at = self._one(cur, "SELECT at FROM changes WHERE seq = ?", (head,)) or ""
        return History(self._world(data), head, since, self._policy_record(cur, head), at)

    def _world(self, data: dict[str, Any]) -> World:
        # a store opened without a policy reads the actions its grants name (they were checked on the way in)
        actions = self.actions or tuple(sorted({g[1] for g in data["grants"]}))
        return world_from_data(data, actions)

    def _replayed(self, cur: Any, seq: int) -> History:
        """The store at entry ``seq``, replayed from the last checkpoint at or before it (or the empty store)."""
        start = int(
            self._one(
                cur, "SELECT coalesce(max(seq), 0) FROM changes WHERE kind = ? AND seq <= ?", (CHECKPOINT, seq)
            )
        )
        begins = int(self._one(cur, "SELECT value FROM meta WHERE key = ?", ("history_from",)) or 0)
        if seq < begins:
            at = self._one(cur, "SELECT at FROM changes WHERE seq = ?", (begins,))
            raise StoreError(
                f"the store's history starts at log entry {begins} ({at}), when it was upgraded to keep it; "
                "ask about a later moment"
            )
        state = _Replay()
        start = max(start - 1, 0)  # the checkpoint itself is replayed: it sets everything
        while True:
            rows = self._rows(cur, _REPLAYED + " ORDER BY seq LIMIT 5000", (start, seq))
            for number, _at, kind, items, effect in rows:
                state.apply(int(number), kind, json.loads(items), None if effect is None else json.loads(effect))
            if len(rows) < 5000:
                break
            start = int(rows[-1][0])
        at = self._one(cur, "SELECT at FROM changes WHERE seq = ?", (seq,)) or ""
        world = self._world(state.data())
        return History(world, seq, dict(state.granted), self._policy_record(cur, seq), at)

    def _policy_record(self, cur: Any, seq: int) -> PolicyRecord | None:
        policy_seq, version = self._policy_in_force(cur, seq)
        if not policy_seq:
            return None
        rows = self._rows(cur, "SELECT name, source FROM policies WHERE version = ?", (version,))
        return PolicyRecord(policy_seq, rows[0][0], version, rows[0][1]) if rows else None

    def seq_at(self, time: str) -> int:
        with self._transaction(write=False) as cur:
            return int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes WHERE at <= ?", (time,)))

    def policy_at(self, seq: int | None = None) -> PolicyRecord | None:
        with self._transaction(write=False) as cur:
            head = int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes"))
            return self._policy_record(cur, head if seq is None else seq)

    def record_policy(self, name: str, version: str, text: str, actor: str) -> PolicyRecord:
        with self._transaction(write=True) as cur:
            last_seq, last = self._policy_in_force(cur)
            if last_seq and last == version:
                return PolicyRecord(last_seq, name, version, text)
            self._unbounded(cur)
            if self._one(cur, "SELECT 1 FROM policies WHERE version = ?", (version,)) is None:
                cur.execute(
                    self._sql("INSERT INTO policies(version, name, source) VALUES (?, ?, ?)"), (version, name, text)
                )
            entry = self._log(cur, actor, POLICY_USE, ((name, version),), ((name, version),), "", "applied")
            return PolicyRecord(entry.seq, name, version, text)

    def revision(self, seq: int | None = None) -> Revision:
        """The revision of log entry ``seq`` (None: the log's head): it and the policy in force there."""
        with self._transaction(write=False) as cur:
            if seq is None:
                seq = int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes"))
            return Revision(seq, *self._policy_in_force(cur, seq))

    def secret(self, name: str) -> str:
        key = f"secret:{name}"
        with self._transaction(write=False) as cur:
            found = self._one(cur, "SELECT value FROM meta WHERE key = ?", (key,))
        if found is not None:
            return str(found)
        with self._transaction(write=True) as cur:  # two making it at once: the first one's stands
            statement = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT DO NOTHING"
            cur.execute(self._sql(statement), (key, secrets.token_hex(32)))
            return str(self._one(cur, "SELECT value FROM meta WHERE key = ?", (key,)))

    def roles(self) -> list[str]:
        with self._transaction(write=False) as cur:
            return [r[0] for r in self._rows(cur, "SELECT role FROM roles ORDER BY role")]

    def changes_since(self, seq: int, limit: int = 10_000) -> list[Change]:
        with self._transaction(write=False) as cur:
            rows = self._rows(
                cur, f"SELECT {_CHANGE_COLUMNS} FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
            )
        return [_change(row) for row in rows]

    def last_seq(self) -> int:
        with self._transaction(write=False) as cur:
            return int(self._one(cur, "SELECT coalesce(max(seq), 0) FROM changes"))

    def audit(
        self, principal: str | None = None, entity: str | None = None, since: str | None = None, limit: int = 1000
    ) -> list[Change]:
        where, params = [], []
        if principal is not None:
            where.append(f"(actor = ? OR {self.contains}(items, ?) > 0 OR {self.contains}(asked, ?) > 0)")
            params += [principal, json.dumps(principal), json.dumps(principal)]
        if entity is not None:
            where.append(f"({self.contains}(items, ?) > 0 OR {self.contains}(asked, ?) > 0)")
            params += [json.dumps(entity), json.dumps(entity)]
        if since is not None:
            where.append("at >= ?")
            params.append(since)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._transaction(write=False) as cur:
            rows = self._rows(
                cur,
                f"SELECT * FROM (SELECT {_CHANGE_COLUMNS} FROM changes {clause} ORDER BY seq DESC LIMIT ?) AS t "
                "ORDER BY seq",
                (*params, limit),
            )
        return [_change(row) for row in rows]

    # ---- bulk -----------------------------------------------------------------------------

    def import_world(self, world: World, actor: str) -> dict[str, int]:
        if world.facts:  # refused, not dropped: a store has no table for them
            raise StoreError(facts_refusal(world))
        grants = [(g.principal, g.action, str(g.entity)) for g in world.grants]
        tables: list[tuple[str, str, list[tuple[Any, ...]]]] = [
            ("entities", "entity, top", [(str(e), top_of(e)) for e in world.entities]),
            ("grants", "principal, action, entity, since", []),  # with the import's entry, below
            ("members", "member, grp", sorted(world.members)),
            ("admins", "principal", [(a,) for a in world.admins]),
            (
                "roles",
                "role",
                sorted(
                    {(p,) for pair in world.members for p in pair if p.startswith("role:")}
                    | {(g.principal,) for g in world.grants if g.principal.startswith("role:")}
                ),
            ),
        ]
        counts: dict[str, int] = {}
        with self._transaction(write=True) as cur:
            self._unbounded(cur)  # a million rows: seconds, beyond a statement's bound
            instance = self._one(cur, "SELECT value FROM meta WHERE key = ?", ("instance",))
            if world.instance != instance:
                has = self._one(cur, "SELECT 1 FROM entities LIMIT 1") or self._one(cur, "SELECT 1 FROM grants LIMIT 1")
                if has:
                    raise StoreError(
                        f"the world is of instance `{world.instance}` and the store of `{instance}`; "
                        "import it into a new store"
                    )
                cur.execute(self._sql("UPDATE meta SET value = ? WHERE key = ?"), (world.instance, "instance"))
            # the grants name the entry that made them (marked -1 until it is logged); the entry's effect holds
            # the rows, so that the log replayed gives the store at any entry (rows already there stay as they were)
            tables[1] = ("grants", "principal, action, entity, since", [(*g, -1) for g in grants])
            for table, columns, rows in tables:
                counts[table] = self._bulk_insert(cur, table, columns, rows)
            effect = {"instance": world.instance, **_rows_of(world)}
            entry = self._log(cur, actor, IMPORT, (), (counts,), "", "applied", effect, self._policy_in_force(cur))
            cur.execute(self._sql("UPDATE grants SET since = ? WHERE since = -1"), (entry.seq,))
        return counts

    def _bulk_insert(self, cur: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> int:
        before = int(self._one(cur, f"SELECT count(*) FROM {table}"))
        marks = ", ".join("?" for _ in columns.split(","))
        statement = self._sql(f"INSERT INTO {table}({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING")
        rows.sort()  # in key order, each insert appends to the index instead of splitting its pages
        for start in range(0, len(rows), 50_000):
            cur.executemany(statement, rows[start : start + 50_000])
        return int(self._one(cur, f"SELECT count(*) FROM {table}")) - before

    # ---- tokens ---------------------------------------------------------------------------

    def create_token(self, principal: str, actor: str) -> tuple[str, str]:
        token_id, digest, token = new_token()
        (principal,) = check_items("admin.add", [principal])
        with self._transaction(write=True) as cur:
            cur.execute(
                self._sql("INSERT INTO tokens(token_id, digest, principal, created) VALUES (?, ?, ?, ?)"),
                (token_id, digest, principal, now()),
            )
            self._log(cur, actor, "token.create", ((token_id, principal),), ((token_id, principal),), "", "applied")
        return token_id, token

    def revoke_token(self, token_id: str, actor: str) -> bool:
        return bool(self.change(actor, "token.revoke", [token_id], trusted=True).items)

    def tokens(self) -> list[Token]:
        with self._transaction(write=False) as cur:
            rows = self._rows(cur, "SELECT token_id, principal, created, revoked FROM tokens ORDER BY created")
        return [Token(*row) for row in rows]

    def token_principal(self, token: str) -> str | None:
        parts = split_token(token)
        if parts is None:
            return None
        with self._transaction(write=False) as cur:
            row = self._rows(
                cur, "SELECT digest, principal FROM tokens WHERE token_id = ? AND revoked IS NULL", (parts[0],)
            )
        if row and secret_matches(parts[1], row[0][0]):
            return str(row[0][1])
        return None

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._closed = True
            if self._reader is not None:
                self._reader.close()
            self._conn.close()


def _rows_of(world: World) -> dict[str, list[Any]]:
    """A world's rows as the log's effect keeps them (an import's, a checkpoint's)."""
    return {
        "entities": sorted(str(e) for e in world.entities),
        "grants": sorted([g.principal, g.action, str(g.entity)] for g in world.grants),
        "members": sorted([m, g] for m, g in world.members),
        "admins": sorted(world.admins),
    }


class _Replay:
    """A store's rows as its log replays them, entry by entry (:meth:`SqlStore.history`)."""

    def __init__(self) -> None:
        self.instance = DEFAULT_INSTANCE
        self.entities: set[str] = set()
        self.granted: dict[tuple[str, str, str], int] = {}  # each grant: the entry that made it
        self.members: set[tuple[str, str]] = set()
        self.admins: set[str] = set()

    def apply(self, seq: int, kind: str, items: list[Any], effect: Any) -> None:
        if kind not in _WORLD_KINDS:
            return
        if kind == CHECKPOINT:  # the whole world: nothing before it stands
            self.entities, self.granted, self.members, self.admins = set(), {}, set(), set()
        if kind in (IMPORT, CHECKPOINT):
            self.instance = effect["instance"]
            self.entities.update(effect["entities"])
            for grant in effect["grants"]:
                self.granted.setdefault(tuple(grant), seq)
            self.members.update(tuple(m) for m in effect["members"])
            self.admins.update(effect["admins"])
        elif kind == "grant":
            for grant in items:
                self.granted[tuple(grant)] = seq
        elif kind in ("revoke", "revoke.entity"):
            for grant in items:
                self.granted.pop(tuple(grant), None)
        elif kind == "member.add":
            self.members.update(tuple(m) for m in items)
        elif kind == "member.remove":
            self.members.difference_update(tuple(m) for m in items)
        elif kind == "admin.add":
            self.admins.update(items)
        elif kind == "admin.remove":
            self.admins.difference_update(items)
        elif kind == "entity.add":
            self.entities.update(items)
        elif kind == "entity.delete":
            self.entities.difference_update(effect["entities"] if effect else items)
        elif kind == "role.drop" and effect:
            self.members.difference_update(tuple(m) for m in effect["members"])
            for grant in effect["grants"]:
                self.granted.pop(tuple(grant), None)
            self.admins.difference_update(effect["admins"])

    def data(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "entities": sorted(self.entities),
            "grants": [list(g) for g in self.granted],
            "members": [list(m) for m in self.members],
            "admins": sorted(self.admins),
        }


def _change(row: tuple[Any, ...]) -> Change:
    seq, at, actor, kind, items, asked, request_id, outcome = row
    return Change(
        int(seq), at, actor, kind, _tuples(json.loads(items)), _tuples(json.loads(asked)), request_id or "", outcome
    )


def _tuples(items: list[Any]) -> tuple[Any, ...]:
    return tuple(tuple(i) if isinstance(i, list) else i for i in items)


# schema version -> the statements that bring version - 1 to it (version 1 is created whole)
MIGRATIONS: dict[int, list[str]] = {
    1: [],
    2: [  # revisions and history: what each change did beyond its items, the policies served, each grant's entry
        "ALTER TABLE changes ADD COLUMN effect TEXT",
        "ALTER TABLE grants ADD COLUMN since INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE policies(version TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL)",
        "CREATE INDEX changes_kind ON changes(kind, seq)",
    ],
}
