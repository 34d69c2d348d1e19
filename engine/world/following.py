"""A world following its file: the log replayed, others' changes taken in, its own logged.

A world read from a file holds a :class:`Following`: where the next read of the
file and its change log (:mod:`engine.world.log`) starts. A world bound to its
file makes each change under the file's lock, after taking in what others wrote
since it last read it, and logs it before making it; the log is compacted into
the file (in place, :mod:`engine.world.writing`; atomically) once it has grown.
A world that follows a file it is not bound to (the REPL's) keeps its changes in
a journal until it is saved, and re-applies them on top of others'.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from privilog.dsl.files import FileRefused, read_world_text, write_atomically
from privilog.engine.world.log import Change, Identity, LogDamaged, Logged, WorldFile, log_bound
from privilog.engine.world.model import World, WorldError, keep_bound_files
from privilog.engine.world.readers import parse_world
from privilog.engine.world.writing import world_text


@dataclass
class Following:
    """The file a world was read from, and how much of it: where the next read of it starts; and
    what keeps the world in step with it (others' changes taken in, its own logged, compaction).

    ``taken_in`` counts the changes others made that were read in since, ``rereads`` the times the
    file itself was replaced (compacted or edited) and read anew, ``dropped`` the unsaved changes
    given up because their actor is no longer an admin: what a program tells its user.
    """

    file: WorldFile
    seen: Identity | None
    end: int  # bytes of the log read: every whole change before it
    lines: int  # lines of the log read
    taken_in: int = 0
    rereads: int = 0
    dropped: list[Change] = field(default_factory=list)

    def log(self, change: Change) -> None:
        """Append a change to the file's log, fsynced (the lock is held)."""
        self.log_all([change])

    def log_all(self, changes: list[Change]) -> None:
        """Append changes to the file's log in one write, fsynced (the lock is held)."""
        self.end = self.file.append(changes, self.end)
        self.lines += len(changes)

    def grown(self) -> bool:
        """Whether the log has grown past its bound (:func:`engine.world.log.log_bound`): time to compact it."""
        return self.end > log_bound(self.seen.size if self.seen else 0)

    def take_in(self, world: World, locked: bool = False) -> int:
        """:meth:`World.take_in`: others' changes to the file read into ``world``."""
        file = self.file
        if file.identity() != self.seen or file.log_size() < self.end:
            taken = self._read_again(world, locked)
        else:
            logged = file.read(self.end, self.lines + 1)
            for number, change in logged.changes:
                world._tell(change.kind, world._apply(change, f"{file.log}:{number}"))
            self.end, self.lines = logged.end, self.lines + len(logged.changes)
            taken = len(logged.changes)
            self.taken_in += taken
        if taken and world.journal and not self._reapply_journal(world):
            # a change given up was made here: start again from the file, with the rest on top
            self._read_again(world, locked)
            self._reapply_journal(world)
        return taken

    def _read_again(self, world: World, locked: bool) -> int:
        """Read the file and its log anew, in place of the world's facts (the file was replaced)."""
        file = self.file
        fresh, read = _read_file(file, world.actions, world.path, str(world.path or file.path), locked)
        world.instance, world.entities, world.grants = fresh.instance, fresh.entities, fresh.grants
        world.members, world.admins, world.source = fresh.members, fresh.admins, fresh.source
        world.config, world.owners, world.facts = fresh.config, fresh.owners, fresh.facts
        self.seen, self.end, self.lines = read.seen, read.end, read.lines
        self.rereads += 1
        world._tell("reload", [])
        return -1

    def _reapply_journal(self, world: World) -> bool:
        """The world's unsaved changes made again, in order, on top of others'; False when one
        was given up (its actor is no longer an admin)."""
        kept: list[Change] = []
        for change in world.journal or []:
            if not world.is_admin(change.actor):
                self.dropped.append(change)
                continue
            world._tell(change.kind, world._apply(change, "<unsaved change>"))
            kept.append(change)
        whole = len(kept) == len(world.journal or [])
        world.journal = kept
        return whole

    def save(self, world: World) -> None:
        """:meth:`World.save`: others' changes taken in, then the world compacted into its file."""
        with self.file.locked():
            self.take_in(world, locked=True)
            compact(world, self.file)
        if world.journal is not None:
            world.journal = []


@contextmanager
def changing_bound(world: World) -> Iterator[None]:
    """Around one change of a world bound to a file: the file's lock held for the change, what
    others wrote since the world last read it taken in before anything is decided; the change is
    logged (:meth:`Following.log`) before it is made. The log is compacted into the file when it
    has grown past its bound (:func:`engine.world.log.log_bound`), and at once when the world was
    made in memory and has no log yet."""
    assert world.path is not None
    file = world.following.file if world.following is not None else WorldFile(world.path)
    with file.locked():
        if world.following is not None:
            world.following.take_in(world, locked=True)
        yield
        following = world.following
        if following is None or following.grown():
            compact(world, file)


def compact(world: World, file: WorldFile) -> None:
    """Write the world into its file and remove the log, which the file now holds (the lock is held)."""
    text = world_text(world)
    try:
        write_atomically(file.path, text, "world")
    except FileRefused as error:
        raise WorldError(str(error)) from None
    file.remove_log()
    if world.source is not None:
        world.source = text
    previous = world.following
    following = Following(file, file.identity(), 0, 0)
    if previous is not None:
        following.taken_in, following.rereads = previous.taken_in, previous.rereads
    world.following = following


keep_bound_files(changing_bound)  # the model imports no file: it is told here how a bound world's change is made


READ_TRIES = 8  # reads of a world file and its log that a compaction may spoil before the lock is taken


def read_world_file(
    file: WorldFile, actions: Iterable[str], bound: Path | None, name: str, locked: bool = False
) -> World:
    """A world file and its log, read as of one moment, without the lock when nobody compacts meanwhile.

    The file's identity is taken before and after: a compaction replaces the file before it
    removes the log, so when the file is unchanged the log read belongs to it. (A log read
    that a compaction has just emptied goes with the new file; one read before, with either:
    replaying changes the file holds already changes nothing.)
    """
    world, following = _read_file(file, actions, bound, name, locked)
    world.following, world.origin = following, name
    return world


def _read_file(
    file: WorldFile, actions: Iterable[str], bound: Path | None, name: str, locked: bool
) -> tuple[World, Following]:
    actions = tuple(actions)
    for _ in range(1 if locked else READ_TRIES):
        seen, text, logged = _read_once(file, name)
        if locked or file.identity() == seen:
            break
    else:
        with file.locked():
            seen, text, logged = _read_once(file, name)
    world = parse_world(text, actions, name, bound)
    for number, change in logged.changes:
        world._apply(change, f"{file.log}:{number}")
    if file.path.suffix.lower() != ".json" and not text.lstrip().startswith("{"):
        world.source = text  # YAML: saved by editing this text (JSON is written afresh, as YAML)
    return world, Following(file, seen, logged.end, len(logged.changes))


def _read_once(file: WorldFile, name: str) -> tuple[Identity | None, str, Logged]:
    seen = file.identity()
    try:
        text = read_world_text(name)
    except FileRefused as error:
        raise WorldError(str(error)) from None
    try:
        logged = file.read()
    except LogDamaged as error:
        raise WorldError(str(error)) from None
    return seen, text, logged


def save_world(world: World, path: Path) -> None:
    """Write ``world`` to ``path`` atomically, in place of what is there: a crash leaves the old
    file or the new, never half. The file's change log, if it has one, is removed (the world
    written is the whole truth); the world's lock is held meanwhile.

    A world read from YAML is saved into the text it was read from, changing only
    the entries that changed (:mod:`engine.world.yamlsave`), so that a world file kept in
    git diffs cleanly; any other world is written out in full. A symbolic link stays
    a link (its target is replaced), and the file keeps its permissions and, where
    the process may set it, its owner (:func:`dsl.files.write_atomically`).

    To write a world back into the file it follows without overwriting others' changes,
    use :meth:`World.save`.
    """
    file = WorldFile(path)
    follows = world.path is None or WorldFile(world.path).path == file.path
    try:
        with file.locked():
            if follows:
                compact(world, file)
                if world.journal is not None:
                    world.journal = []
                return
            text = world_text(world)
            write_atomically(file.path, text, "world")
            file.remove_log()
    except FileRefused as error:
        raise WorldError(str(error)) from None
