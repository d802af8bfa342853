"""A headless Chromium (Debian's package) driven over the DevTools protocol with websocket-client: navigate,
evaluate JavaScript, collect console errors and exceptions, take screenshots."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from tests.support.processes import stop
from tests.support.wait import wait_for


class Browser:
    def __init__(self, profile: Path, width: int = 1400, height: int = 1500) -> None:
        exe = shutil.which("chromium")
        if exe is None:
            raise RuntimeError("chromium is not installed: run `bash setup/setup-browser.sh` (make setup does)")
        self.proc = subprocess.Popen([
            exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--metrics-recording-only", "--no-default-browser-check",
            f"--window-size={width},{height}", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            f"--user-data-dir={profile}", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._port(profile / "DevToolsActivePort")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            pages = [t for t in json.loads(resp.read()) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self._next = 0
        self.errors: list[str] = []
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return int(path.read_text().splitlines()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port within 60 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self._event(msg)

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(f"exception: {params['exceptionDetails'].get('text')} "
                               f"{params['exceptionDetails'].get('exception', {}).get('description', '')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                            for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """Evaluate until truthy; the last value. A timeout's failure lists the page's errors too."""
        try:
            return wait_for(expression, lambda: self.evaluate(expression), timeout_s, interval_s=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; page errors: {self.errors}") from None

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            stop(self.proc, 20)
