"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for the report's tests.

One browser process per test module, started with ``--remote-debugging-port=0``;
the port it chose is read from ``DevToolsActivePort`` in its profile folder (waited
for with a deadline). Each page is opened in a new target over one websocket
(``websockets``' synchronous client), and everything the page reports is kept:
console messages, uncaught exceptions, log entries (a refused resource, a
Content-Security-Policy violation), JavaScript dialogs (an ``alert`` accepted and
recorded) and every request it makes.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

DEADLINE = 60.0  # seconds for the browser to start and for a page to load; never reached when all is well
NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    """The chromium executable on PATH, or None."""
    return next((found for name in NAMES if (found := shutil.which(name))), None)


@dataclass
class Page:
    """What a loaded page reported, and its DOM as seen by the browser."""

    url: str
    console: list[dict[str, Any]] = field(default_factory=list)  # Runtime.consoleAPICalled params
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # Runtime.exceptionThrown params
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded entries
    dialogs: list[dict[str, Any]] = field(default_factory=list)  # Page.javascriptDialogOpening params
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    screenshot: bytes = b""  # the whole page, PNG

    @property
    def errors(self) -> list[str]:
        """Every console error, uncaught exception and error or warning logged, as text."""
        found = [
            " ".join(str(a.get("value", a.get("description", ""))) for a in c.get("args", []))
            for c in self.console
            if c.get("type") in ("error", "assert", "warning")
        ]
        found += [e.get("exceptionDetails", {}).get("text", "exception") for e in self.exceptions]
        found += [f"{e.get('source')}: {e.get('text')}" for e in self.log if e.get("level") in ("error", "warning")]
        return found


class Chromium:
    """A headless browser process and a DevTools connection to it."""

    def __init__(self, executable: str, profile: Path):
        self.profile = profile
        self.stderr = (profile.parent / "chromium.stderr").open("wb")
        arguments = [
            executable,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        if os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=self.stderr)
        port, path = self._endpoint()
        self.closing = contextlib.ExitStack()
        url = f"ws://127.0.0.1:{port}{path}"
        self.socket: ClientConnection = self.closing.enter_context(connect(url, max_size=None, open_timeout=DEADLINE))
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def _endpoint(self) -> tuple[str, str]:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}; see {self.stderr.name}")
            lines = marker.read_text().splitlines() if marker.exists() else []
            if len(lines) >= 2:
                return lines[0], lines[1]
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not open its DevTools port within {DEADLINE:.0f} s")

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv(timeout=DEADLINE))
            if answer.get("id") == ident:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer.get("result", {}))
            self._event(answer)

    def _event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event.get("method") == "Page.javascriptDialogOpening":  # answered, or the page would hang
            ident = next(self.ids)
            reply = {"id": ident, "method": "Page.handleJavaScriptDialog", "params": {"accept": True}}
            self.socket.send(json.dumps({**reply, "sessionId": event["sessionId"]}))

    def wait_for(self, method: str, session: str) -> None:
        """Until the event ``method`` arrives for ``session`` (within the deadline)."""
        deadline = time.monotonic() + DEADLINE
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} within {DEADLINE:.0f} s")
            message = json.loads(self.socket.recv(timeout=left))
            if "id" not in message:
                self._event(message)

    def open(self, url: str, width: int = 1200, height: int = 900) -> tuple[Page, str]:
        """Load ``url`` in a new tab; the page's reports, its screenshot, and the session to ask it more."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        # a final round trip, so that whatever the load logged has arrived before it is read
        self.call("Runtime.evaluate", {"expression": "1"}, session)
        page = Page(url)
        for event in self.events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                page.console.append(params)
            elif method == "Runtime.exceptionThrown":
                page.exceptions.append(params)
            elif method == "Log.entryAdded":
                page.log.append(params["entry"])
            elif method == "Page.javascriptDialogOpening":
                page.dialogs.append(params)
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        metrics = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 4000), "scale": 1}
        shot = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session
        )
        page.screenshot = base64.b64decode(shot["data"])
        return page, session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page (DevTools' own evaluation, not the page's scripts)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self.closing.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()
