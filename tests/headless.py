"""A page opened in headless Chromium over the DevTools protocol, with the standard library only.

Why the pipe transport (``--remote-debugging-pipe``): no port to pick or wait for and no websocket
client to install; Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and
events on fd 4. ``open_page`` loads a file, waits for its load event, and returns the console
messages, exceptions and log entries it produced, whether every image decoded, and a full-page
PNG screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Tallest screenshot taken (CSS pixels): Chromium refuses a capture of a page much taller ("Page is too large").
MAX_SHOT_HEIGHT = 12000

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_S = 60.0


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


@dataclass(frozen=True)
class PageResult:
    errors: list[str]  # console errors, uncaught exceptions, log entries of level error
    messages: list[str]  # every console message and log entry
    images: list[bool]  # per <img>: loaded and decoded
    screenshot: bytes  # PNG


class _Browser:
    def __init__(self, executable: str) -> None:
        self._to_r, self._to_w = os.pipe()
        self._from_r, self._from_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="composer-chromium-")
        to_r, from_w = self._to_r, self._from_w

        def fds() -> None:  # in the child: the protocol's fds 3 and 4
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(self._to_r)
        os.close(self._from_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_w, json.dumps(message).encode() + b"\0")
        reply = self._until(lambda m: m.get("id") == self._id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        return self._until(lambda m: m.get("method") == method)

    def _until(self, wanted: Any) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
                self.events.append(message)
            if time.monotonic() > deadline:
                raise TimeoutError("headless Chromium did not answer in time")
            ready, _, _ = select.select([self._from_r], [], [], 0.5)
            if ready:
                chunk = os.read(self._from_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("headless Chromium closed the protocol pipe")
                self._buffer += chunk

    def close(self) -> None:
        try:
            os.write(self._to_w, json.dumps({"id": self._id + 1, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(20)
        finally:
            for fd in (self._to_w, self._from_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)


def _text(event: dict[str, Any]) -> tuple[str, bool]:
    params = event.get("params", {})
    if event["method"] == "Runtime.consoleAPICalled":
        args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        return f"console.{params.get('type')}: {args}", params.get("type") in ("error", "assert")
    if event["method"] == "Runtime.exceptionThrown":
        return f"exception: {params.get('exceptionDetails', {}).get('text')}", True
    entry = params.get("entry", {})
    return f"log {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}", entry.get("level") == "error"


def open_page(file: Path, executable: str, width: int = 1280) -> PageResult:
    browser = _Browser(executable)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            browser.send(domain, session=session)
        browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                            "mobile": False}, session=session)
        browser.send("Page.navigate", {"url": Path(file).resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        images = browser.send("Runtime.evaluate", {"expression": "Array.from(document.images).map(i => i.complete && "
                                                                 "i.naturalWidth > 0)", "returnByValue": True},
                              session=session)["result"]["value"]
        # the whole page, up to a height Chromium can capture in one image (a long report exceeds it)
        size = browser.send("Page.getLayoutMetrics", {}, session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], MAX_SHOT_HEIGHT), "scale": 1}
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                            session=session)
        relevant = [e for e in browser.events
                    if e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")]
        texts = [_text(e) for e in relevant]
        return PageResult([t for t, bad in texts if bad], [t for t, _ in texts], list(images),
                          base64.b64decode(shot["data"]))
    finally:
        browser.close()
