"""A small W3C WebDriver client for Debian's chromedriver and headless Chromium.

Just what the browser tests use (open a URL, run a script, take a screenshot), over the
standard WebDriver HTTP protocol with urllib, so the tests need no client library and
nothing is downloaded: the browser and driver are the system's /usr/bin/chromium and
/usr/bin/chromedriver (Debian packages chromium and chromium-driver).
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.carbon_env import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# headless, and no background connections: this machine's network is closed
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--window-size=1280,900"]


class WebDriverError(RuntimeError):
    """chromedriver answered a command with an error."""


def missing() -> str | None:
    """What is missing to run a browser test, or None."""
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    if absent:
        return (f"{' and '.join(absent)} not found: install Debian's chromium and chromium-driver"
                " (scripts/test.sh does when run as root)")
    return None


class Browser:
    """chromedriver on a free port and one headless Chromium session; a context manager."""

    def __init__(self) -> None:
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="bgl-chromium-")
        self.driver = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.session: str | None = None

    def __enter__(self) -> "Browser":
        try:
            self._wait_for_driver()
            capabilities = {"browserName": "chrome", "goog:chromeOptions": {
                "binary": CHROMIUM, "args": [*CHROMIUM_ARGS, f"--user-data-dir={self.profile}"]}}
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})["sessionId"]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.session is not None:
            try:
                self._call("DELETE", f"/session/{self.session}")
            except (OSError, WebDriverError):
                pass
            self.session = None
        self.driver.terminate()
        try:
            self.driver.wait(10)
        except subprocess.TimeoutExpired:
            self.driver.kill()
            self.driver.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _wait_for_driver(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except OSError:
                pass
            if self.driver.poll() is not None or time.monotonic() > deadline:
                raise WebDriverError(f"chromedriver did not start (exit {self.driver.poll()})")
            time.sleep(0.1)

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            value = json.loads(error.read() or b"{}").get("value", {})
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:500]}") from None

    # -- commands --------------------------------------------------------------------------
    def open(self, url: str) -> None:
        """Navigate and wait for the page's load event (the driver's default page-load strategy)."""
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def script(self, source: str, *args: object) -> Any:
        """Run a function body in the page (`return ...`), with `arguments`."""
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": source, "args": list(args)})

    def wait_for(self, source: str, timeout: float = 30.0, *args: object) -> Any:
        """Run the script until it returns something true; returns that."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.script(source, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise WebDriverError(f"still false after {timeout}s: {source}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> bytes:
        """Save a PNG of the viewport to `path`; returns its bytes."""
        png = base64.b64decode(self._call("GET", f"/session/{self.session}/screenshot"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        return png
