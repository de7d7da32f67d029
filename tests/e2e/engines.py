"""The engines Playwright cannot drive as Debian ships them, each with a report file open from
disk and every request but the file itself refused, recorded and failed by the test:

- Firefox (`firefox-esr`), over WebDriver BiDi, which it speaks natively (no geckodriver): a
  network intercept fails every request of the tab but the file's own, and `log.entryAdded`
  records console errors, the page's `console.warn` calls and uncaught exceptions and
  rejections (the Content-Security-Policy's refusals too), from the page's first byte on (so
  Firefox needs no collector of WebKit's below); a prompt the page opens is recorded from
  `browsingContext.userPromptOpened`, and dismissed.
- WebKit, Safari's engine (`webkit2gtk-driver`: WebKitWebDriver and its MiniBrowser), over
  classic WebDriver in a private Xvfb display. Classic WebDriver sees neither requests nor the
  console, and WebKitGTK 2.50 offers no WebDriver BiDi (a session asking for `webSocketUrl` is
  refused; MiniBrowser's `--enable-write-console-messages-to-stdout` prints nothing for an
  automation session), so: the session's proxy is a local one that refuses and records every
  connection; the page's resource timing entries must name nothing but the file and inline
  data; and the tab opens a copy of the file whose first script is the harness's collector
  (`with_first_script`: allowed by its hash, added to the file's Content-Security-Policy, which
  still refuses every other script), recording uncaught errors, unhandled rejections, CSP
  refusals and `console.error`/`console.warn` calls from the page's first byte on, before it
  is ever ready too. (WebKit tells an uncaught error of a page opened from `file://`, an
  opaque origin, as "Script error." only: the failure says that one happened; Chromium and
  Firefox say which.) A prompt the page opens (`alert`) is left open and seen by the
  WebDriver's alert command.

A browser opens in light or dark colour scheme (`color_scheme`): Firefox by its profile's
preferences, MiniBrowser by its `--dark-mode` option.

Each tab has `evaluate(function_source, *args)` and `screenshot(path)` (report_checks.Tab),
`refused`, `errors` and `dialogs`, and `close(check=True)`, which asserts all three are empty.
`tab.in_frame(selector)` is the page of a frame in it (a `Frame`: `evaluate`, `screenshot`, its
`errors`), reached through the protocol, since the page's own scripts cannot reach into a frame
sandboxed without `allow-same-origin` (a notebook cell's, `tb_plugin.show`):

- Firefox: the frame's own browsing context (its `contentWindow`, which BiDi gives as that
  context), the target of its scripts. A frame's context is its tab's from its creation on
  (`browsingContext.contextCreated`), so its requests are refused and its console errors and
  uncaught exceptions recorded as the tab's, from its first byte on.
- WebKit: each script switches into the frame (`POST /session/{id}/frame` with the iframe
  element) and back (`/frame/parent`). The copy the tab opens has the collector first in the
  page of each `srcdoc` frame too (`with_collector_in_frames`), and the frame's errors are
  what that one recorded; its requests, as the tab's, go to the refusing proxy.

No browser is downloaded.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

FIREFOX = Path("/usr/bin/firefox-esr")
WEBKIT_DRIVER = Path("/usr/bin/WebKitWebDriver")
XVFB = Path("/usr/bin/Xvfb")
WIDTH, HEIGHT = 1400, 1000
TIMEOUT_S = 90
# Inline data never leaves the file (the page's icon is `data:,`, its CSV downloads blobs).
INLINE = ("data:", "blob:")


def _leaves(url, own):
    return url.split("#")[0].split("?")[0] != own and not url.startswith(INLINE)


def _check(errors, refused, dialogs):
    assert not errors, errors
    assert not refused, f"requests leaving the file: {refused}"
    assert not dialogs, f"the page opened a prompt (script from the trace ran?): {dialogs}"


def _stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# Firefox's preferences for each colour scheme: the system's theme, and the one pages see
# (`prefers-color-scheme` content override: 0 dark, 1 light).
_FIREFOX_SCHEMES = {"light": {"ui.systemUsesDarkTheme": 0, "layout.css.prefers-color-scheme.content-override": 1},
                    "dark": {"ui.systemUsesDarkTheme": 1, "layout.css.prefers-color-scheme.content-override": 0}}


class Firefox:
    """A headless Firefox in a fresh profile, driven over WebDriver BiDi, its pages in
    `color_scheme` ("light" or "dark")."""

    def __init__(self, color_scheme="light"):
        import websocket  # websocket-client, a test dependency

        self.profile = tempfile.mkdtemp(prefix="tb_plugin_firefox_")
        Path(self.profile, "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {v});\n" for k, v in _FIREFOX_SCHEMES[color_scheme].items()), "utf-8")
        self.process = subprocess.Popen(
            [str(FIREFOX), "--headless", "--no-remote", "--profile", self.profile, "--remote-debugging-port=0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log, self.socket = [], None
        try:
            url = None
            for line in self.process.stderr:
                self.log.append(line)
                match = re.search(r"WebDriver BiDi listening on (ws://\S+)", line)
                if match:
                    url = match.group(1)
                    break
            if url is None:
                raise RuntimeError(f"Firefox did not start its WebDriver BiDi server: {''.join(self.log)[-2000:]}")
            # the rest of its stderr drained, so that a full pipe never blocks it
            threading.Thread(target=self.log.extend, args=(self.process.stderr,), daemon=True).start()
            # Firefox refuses a handshake carrying an Origin header (not a page's socket)
            self.socket = websocket.create_connection(f"{url}/session", timeout=TIMEOUT_S, suppress_origin=True)
            self.next_id, self.tabs = 0, {}
            self.command("session.new", capabilities={})
            self.command("session.subscribe", events=["log.entryAdded", "network.beforeRequestSent",
                                                      "browsingContext.userPromptOpened",
                                                      "browsingContext.contextCreated"])
        except BaseException:
            self.close()
            raise

    def send(self, method, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return self.next_id

    def command(self, method, **params):
        """Send a command and return its result, handing the events that come meanwhile to
        their tab (a blocked request is answered at once, or the command waits forever)."""
        wanted = self.send(method, **params)
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == wanted:
                if message.get("type") == "error":
                    raise RuntimeError(f"{method}: {message.get('error')}: {message.get('message')}")
                return message["result"]
            if message.get("type") == "event":
                params = message["params"]
                if message["method"] == "browsingContext.contextCreated":
                    # a frame's events (its requests, console, errors) are its tab's
                    if params.get("parent") in self.tabs:
                        self.tabs[params["context"]] = self.tabs[params["parent"]]
                    continue
                tab = self.tabs.get(params.get("context") or params.get("source", {}).get("context"))
                if tab is not None:
                    tab.event(message["method"], params)

    def evaluate(self, context, function, args):
        """The JSON result of the JavaScript `function` called with `args` in `context` (a tab's
        or a frame's browsing context)."""
        expression = f"(async () => JSON.stringify(await ({function})(...{json.dumps(list(args))})))()"
        result = self.command("script.evaluate", expression=expression, target={"context": context}, awaitPromise=True)
        if result["type"] == "exception":
            raise RuntimeError(result["exceptionDetails"].get("text"))
        value = result["result"]
        return json.loads(value["value"]) if value["type"] == "string" else None

    def open(self, path):
        return FirefoxTab(self, path)

    def close(self):
        if self.socket is not None:
            with contextlib.suppress(Exception):
                self.command("browser.close")
            with contextlib.suppress(Exception):
                self.socket.close()
        _stop(self.process)
        shutil.rmtree(self.profile, ignore_errors=True)


class FirefoxTab:
    def __init__(self, firefox, path):
        self.firefox, self.url = firefox, path.as_uri()
        self.refused, self.errors, self.dialogs = [], [], []
        self.context = firefox.command("browsingContext.create", type="tab")["context"]
        firefox.tabs[self.context] = self
        firefox.command("browsingContext.setViewport", context=self.context,
                        viewport={"width": WIDTH, "height": HEIGHT})
        firefox.command("network.addIntercept", phases=["beforeRequestSent"], contexts=[self.context])
        firefox.command("browsingContext.navigate", context=self.context, url=self.url, wait="complete")

    def event(self, method, params):
        if method == "log.entryAdded" and (params.get("level") == "error"
                                           or params.get("type") == "console" and params.get("level") == "warn"):
            self.errors.append(params.get("text"))
        elif method == "browsingContext.userPromptOpened":
            self.dialogs.append(f"{params.get('type')}: {params.get('message')}")
            self.firefox.send("browsingContext.handleUserPrompt", context=self.context, accept=False)
        elif method == "network.beforeRequestSent":
            url = params["request"]["url"]
            leaves = _leaves(url, self.url)
            if leaves:
                self.refused.append(url)
            if params.get("isBlocked"):
                request = params["request"]["request"]
                if leaves:
                    self.firefox.send("network.failRequest", request=request)
                else:
                    self.firefox.send("network.continueRequest", request=request)

    def evaluate(self, function, *args):
        return self.firefox.evaluate(self.context, function, args)

    def in_frame(self, selector):
        """The page of the frame at `selector` (`<iframe>`), reached as its own browsing context,
        which a sandboxed frame's scripts need: the page's cannot reach into it."""
        window = self.firefox.command("script.evaluate", expression=f"document.querySelector({json.dumps(selector)})"
                                      ".contentWindow", target={"context": self.context}, awaitPromise=False)
        assert window["result"]["type"] == "window", f"no frame at {selector}: {window}"
        context = window["result"]["value"]["context"]
        return Frame(self, lambda function, args: self.firefox.evaluate(context, function, args), lambda: self.errors)

    def screenshot(self, path):
        shot = self.firefox.command("browsingContext.captureScreenshot", context=self.context, origin="document")
        Path(path).write_bytes(base64.b64decode(shot["data"]))

    def close(self, check=True):
        self.firefox.command("browsingContext.close", context=self.context)
        for context in [c for c, tab in self.firefox.tabs.items() if tab is self]:
            del self.firefox.tabs[context]
        if check:
            _check(self.errors, self.refused, self.dialogs)


class Frame:
    """The page of a frame in `tab`, for the checks (report_checks.Tab): `evaluate` runs a
    script in it through `run(function, args)`, the engine's way in; `screenshot` takes the
    tab's (the frame as its page shows it); `errors` are what the engine saw go wrong in the
    frame, `errors()`. (Chromium's tab, test_report.Offline, makes one too.)"""

    def __init__(self, tab, run, errors):
        self.tab, self.run, self.seen = tab, run, errors

    def evaluate(self, function, *args):
        return self.run(function, args)

    def screenshot(self, path):
        self.tab.screenshot(path)

    @property
    def errors(self):
        return self.seen()


class RefusingProxy:
    """An HTTP(S) proxy on localhost that records every connection made to it (its request
    line, or the first bytes of a TLS handshake) and answers 403."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.seen = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                with contextlib.suppress(OSError):
                    head = connection.recv(4096)
                    # a TLS ClientHello (0x16) is an HTTPS request tunnelled to us; else a request line
                    self.seen.append("a TLS handshake (HTTPS)" if head[:1] == b"\x16"
                                     else head.split(b"\r\n")[0][:200].decode("latin-1"))
                    connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def close(self):
        self.server.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebKit:
    """WebKitWebDriver in a private Xvfb display; one MiniBrowser session per tab, its pages
    in `color_scheme` ("light" or "dark")."""

    def __init__(self, color_scheme="light"):
        # the driver's default browser is MiniBrowser with `--automation`: arguments replace those
        self.arguments = {"light": [], "dark": ["--automation", "--dark-mode"]}[color_scheme]
        self.scratch = tempfile.mkdtemp(prefix="tb_plugin_webkit_")
        read, write = os.pipe()
        self.xvfb = subprocess.Popen([str(XVFB), "-displayfd", str(write), "-nolisten", "tcp",
                                      "-screen", "0", f"{WIDTH}x{HEIGHT}x24"], pass_fds=[write],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(write)
        with os.fdopen(read) as display:
            number = display.readline().strip()
        if not number:
            _stop(self.xvfb)
            raise RuntimeError("Xvfb did not start")
        self.port, self.sessions = _free_port(), set()
        self.log = open(Path(self.scratch) / "webkit.log", "wb")
        self.driver = subprocess.Popen([str(WEBKIT_DRIVER), f"--port={self.port}"], stdout=self.log,
                                       stderr=subprocess.STDOUT, env={**os.environ, "DISPLAY": f":{number}"})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.driver.poll() is not None or time.monotonic() > deadline:
                    log = (Path(self.scratch) / "webkit.log").read_text("utf-8", "replace")[-2000:]
                    self.close()
                    raise RuntimeError(f"WebKitWebDriver did not listen: {log}")
                time.sleep(0.05)

    def call(self, method, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            value = json.loads(error.read())["value"]
            raise RuntimeError(f"{method} {path}: {value.get('error')}: {value.get('message')}") from None

    def open(self, path):
        # the driver holds one session at a time: a tab a failed test left open is closed first
        for session in list(self.sessions):
            self.end(session)
        return WebKitTab(self, path)

    def end(self, session):
        """End `session` (its MiniBrowser too), whatever state it is in."""
        self.sessions.discard(session)
        with contextlib.suppress(Exception):
            self.call("DELETE", f"/session/{session}")

    def close(self):
        for session in list(self.sessions):
            self.end(session)
        _stop(self.driver)
        self.log.close()
        _stop(self.xvfb)
        shutil.rmtree(self.scratch, ignore_errors=True)


# The harness's collector, the first script of the page a WebKit tab opens (`with_first_script`):
# records what the console would show as an error or a warning, from the page's first byte on.
COLLECTOR = """(() => {
    const errors = window.__tbPluginErrors = [];
    addEventListener('error', (e) => errors.push(e instanceof ErrorEvent ? `error: ${e.message}`
        : `failed to load: ${e.target?.src || e.target?.href}`), true);
    addEventListener('unhandledrejection', (e) => errors.push(`unhandled rejection: ${e.reason}`));
    addEventListener('securitypolicyviolation', (e) => errors.push(`refused by the page's policy: ${e.blockedURI}`));
    for (const level of ['error', 'warn']) {
        const original = console[level].bind(console);
        console[level] = (...args) => { errors.push(`console.${level}: ${args.join(' ')}`); original(...args); };
    }
})();"""
_COLLECTED = "() => window.__tbPluginErrors"
_POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', re.IGNORECASE)


def with_first_script(page: str, source: str = COLLECTOR) -> str:
    """`page` (an HTML document) with the classic script `source` first: right after the page's
    Content-Security-Policy, whose `script-src` allows it by its sha256 and nothing more than
    before; after the doctype of a page without a policy."""
    script = f"<script>{source}</script>"
    policy = _POLICY.search(page)
    if policy is None:
        doctype = re.match(r"\s*<!doctype[^>]*>", page, re.IGNORECASE)
        at = doctype.end() if doctype else 0
        return page[:at] + script + page[at:]
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode()
    directives, count = re.subn(r"\bscript-src\b", f"script-src 'sha256-{digest}'", policy.group(1), count=1)
    assert count, f"the page's policy has no script-src to allow the collector in: {policy.group(1)}"
    return f"{page[:policy.start(1)]}{directives}{page[policy.end(1):policy.end()]}{script}{page[policy.end():]}"


_SRCDOC = re.compile(r'\bsrcdoc="([^"]*)"')


def with_collector_in_frames(page: str) -> str:
    """`page` with the collector first in the page of each of its `srcdoc` frames too
    (`with_first_script`), whose errors its own collector cannot see; each attribute written
    back escaped and in ASCII, as `tb_plugin.show` writes it."""
    def planted(match):
        frame = with_first_script(html.unescape(match.group(1)))
        return f'srcdoc="{html.escape(frame, quote=True).encode("ascii", "xmlcharrefreplace").decode("ascii")}"'
    return _SRCDOC.sub(planted, page)


class WebKitTab:
    """`path` opened as a copy whose first script is the collector, in the page of each of its
    `srcdoc` frames too (of the same name, in the driver's scratch directory)."""

    def __init__(self, webkit, path):
        copy = Path(tempfile.mkdtemp(dir=webkit.scratch)) / path.name
        copy.write_text(with_first_script(with_collector_in_frames(path.read_text("utf-8"))), "utf-8")
        self.webkit, self.url = webkit, copy.as_uri()
        self.proxy = RefusingProxy()
        proxy = f"127.0.0.1:{self.proxy.port}"
        capabilities = {"proxy": {"proxyType": "manual", "httpProxy": proxy, "sslProxy": proxy},
                        "timeouts": {"script": TIMEOUT_S * 1000}, "unhandledPromptBehavior": "ignore"}
        if webkit.arguments:
            capabilities["webkitgtk:browserOptions"] = {"args": webkit.arguments}
        self.session = webkit.call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})["sessionId"]
        webkit.sessions.add(self.session)
        self.call("POST", "/window/rect", {"width": WIDTH, "height": HEIGHT})
        self.call("POST", "/url", {"url": self.url})

    def call(self, method, path, body=None):
        return self.webkit.call(method, f"/session/{self.session}{path}", body)

    def evaluate(self, function, *args):
        script = f"const args = arguments; return (async () => JSON.stringify(await ({function})(...args)))()"
        value = self.call("POST", "/execute/sync", {"script": script, "args": list(args)})
        return None if value is None else json.loads(value)

    def in_frame(self, selector):
        """The page of the frame at `selector` (`<iframe>`), each script run in it by switching
        into the frame and back (a sandboxed frame's page is out of the page's scripts' reach);
        its errors those its own collector recorded."""
        element = self.call("POST", "/element", {"using": "css selector", "value": selector})

        def run(function, args):
            self.call("POST", "/frame", {"id": element})
            try:
                return self.evaluate(function, *args)
            finally:
                self.call("POST", "/frame/parent", {})
        return Frame(self, run, lambda: run(_COLLECTED, ()))

    def screenshot(self, path):
        Path(path).write_bytes(base64.b64decode(self.call("GET", "/screenshot")))

    @property
    def errors(self):
        return self.evaluate(_COLLECTED)

    @property
    def dialogs(self):
        """The prompt the page has open (WebDriver leaves it open and refuses scripts meanwhile)."""
        try:
            return [self.call("GET", "/alert/text")]
        except RuntimeError as error:
            if "no such alert" in str(error):
                return []
            raise

    @property
    def refused(self):
        loaded = self.evaluate("() => performance.getEntriesByType('resource').map((e) => e.name)")
        return [u for u in loaded if _leaves(u, self.url)] + [f"through the proxy: {line}" for line in self.proxy.seen]

    def close(self, check=True):
        try:
            dialogs = self.dialogs
            if dialogs:
                self.call("POST", "/alert/dismiss", {})
            errors, refused = self.errors, self.refused
        finally:
            self.webkit.end(self.session)
            self.proxy.close()
        if check:
            _check(errors, refused, dialogs)
