"""``GET /v1/watch?since=REVISION&timeout=SECONDS``: what changed since a revision, and what it may affect.

A client that caches decisions (docs/caches.md) keeps the revision it last saw and asks from it:
the answer is at once when the deployment has replayed log entries after ``since``, else when the
next one arrives, else after ``timeout`` seconds (0 to 60, 30 by default, at most
``--request-timeout``) with no changes. Each change carries its scope (privilog/store/affected.py):
the principals and entities whose decisions it may have changed, None for all. ``reset`` is true
when the deployment cannot say what changed since ``since`` (it is older than the last
:data:`~privilog.store.affected.FEED_SIZE` changes, or older than this process, or made under
another policy): the client drops its whole cache and goes on from ``revision``. Without
``since``: the revision now, and ``reset`` (where a client starts).

The wait never holds the event loop: the handler awaits an :class:`asyncio.Event` that the
deployment's replay sets (from its thread, through ``call_soon_threadsafe``).

What it shows: any valid token may ask (as any token may ask ``/v1/check`` about any principal);
it shows each change's kind, time and revision, the principals whose decisions may have changed
and the entities they concern (what checks before and after would show), never the action, the
actor, nor the grants held.
"""

from __future__ import annotations

import asyncio
import math
from contextlib import suppress
from typing import Any

from starlette.concurrency import run_in_threadpool

from privilog.store.base import StoreError
from privilog.store.deployment import Deployment, Stale
from privilog.store.revision import Revision, parse_revision

from .bodies import HttpError, one_line, shown
from .service import Call

MAX_WAIT = 60.0  # seconds a watch may be asked to wait
DEFAULT_WAIT = 30.0
MAX_CHANGES = 1_000  # changes in one answer; a client further behind asks again from the answer's revision
PARAMETERS = ("since", "timeout")


async def watch(call: Call) -> dict[str, Any]:
    query = call.request.query_params
    for name in query:
        if name not in PARAMETERS:
            raise HttpError(f"no query parameter `{shown(name)}` (parameters: since, timeout)")
    wait = _timeout(query.get("timeout"))
    deployment = call.service.deployment
    since = query.get("since")
    if since is None:  # where a client starts: the revision now, and drop whatever it holds
        with deployment.lock:
            return {"revision": deployment.revision.token, "changes": [], "reset": True}
    try:
        asked = parse_revision(since)
    except StoreError as error:
        raise HttpError(f"since: {one_line(str(error))}") from None
    with deployment.lock:
        covered = deployment.revision.covers(asked)
    if not covered:  # a revision another replica handed out: catch up to it, or say it is not of this log
        try:
            await run_in_threadpool(deployment.at_least, asked)
        except Stale as error:
            raise HttpError(one_line(str(error)), 409) from None
    wait = min(wait, call.service.limits.request_timeout)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:  # called by the replaying thread
        with suppress(RuntimeError):  # the loop closed: the server is stopping
            loop.call_soon_threadsafe(woken.set)

    deployment.feed.listen(wake)
    try:
        end = loop.time() + wait
        while True:
            woken.clear()
            answer = changes_since(deployment, asked)
            left = end - loop.time()
            if answer["changes"] or answer["reset"] or left <= 0:
                return answer
            with suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), left)
    finally:
        deployment.feed.unlisten(wake)


def changes_since(deployment: Deployment, asked: Revision) -> dict[str, Any]:
    """The answer now: the changes after ``asked`` (at most :data:`MAX_CHANGES`), or a reset."""
    with deployment.lock:
        now = deployment.revision
        scoped = deployment.feed.after(asked.seq, MAX_CHANGES)
    if scoped is None or asked.policy_version != now.policy_version:
        return {"revision": now.token, "changes": [], "reset": True}
    revision = scoped[-1].revision if len(scoped) == MAX_CHANGES else now.token
    return {"revision": revision, "changes": [s.to_json() for s in scoped], "reset": False}


def _timeout(text: str | None) -> float:
    if text is None:
        return DEFAULT_WAIT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_WAIT:  # a NaN fails too
        raise HttpError(f"timeout is a number of seconds from 0 to {MAX_WAIT:g}, not {shown(text)}")
    return seconds
