"""The status page in a real browser: Debian's headless Chromium driven by
playwright-core (tests/node/browser.mjs). An unpaired browser is refused
and offered pairing; the person allows it with the (simulated) button; the
page then follows the appliance live (a tool call shows at once), approves
another agent's pairing, revokes a token, and refuses requests from another
origin even with the browser's cookie. Screenshots go to
tests/.output/status-page/. Loopback with `trust_loopback = false`, so the
browser is a stranger until paired."""

import json
import time
import os
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from harness import REPO, Daemon, LineClient, call, hark, response, wait_for
from test_pairing import asking, lights, raw_pair, tokens

NODE = REPO / "tests" / "node" / "node_modules" / ".bin" / "node"
SCRIPT = REPO / "tests" / "node" / "browser.mjs"
SHOTS = REPO / "tests" / ".output" / "status-page"
PAGE = {"auth": {"trust_loopback": False, "pair_timeout_secs": 20}}


class Browser:
    def __init__(self):
        self.proc = subprocess.Popen([str(NODE), str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=SCRIPT.parent)
        self.lock = threading.Lock()

    def __call__(self, command, **args):
        with self.lock:
            self.proc.stdin.write(json.dumps({"do": command, **args}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"{command}: {reply['error']}")
        return reply["ok"]

    def close(self):
        try:
            self("close")
        finally:
            self.proc.wait(10)


@pytest.fixture
def browser():
    if not Path("/usr/bin/chromium").exists():
        pytest.fail("chromium is not installed (tests/setup.sh installs it)")
    b = Browser()
    yield b
    b.close()


@pytest.fixture(scope="module")
def appliance(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("hark-page"), dict(PAGE)).start()
    yield d
    assert d.stop(timeout=15) == 0, d.log()


def shot(browser, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    return browser("screenshot", path=str(SHOTS / f"{name}.png"))


def test_the_page_refuses_an_unpaired_browser_then_pairs_it_and_follows_live(appliance, browser):
    d = appliance
    url = f"http://127.0.0.1:{d.http[1]}/"
    browser("goto", url=url)
    browser("wait_text", selector="#locked h2", contains="not paired")
    assert not browser("visible", selector="#unlocked")
    assert "status page" in browser("text", selector="#locked-why")
    assert browser("text", selector="#error") == ""
    shot(browser, "1-unpaired")
    # The page's data is refused without pairing, whatever the page shows.
    r = httpx.get(f"http://127.0.0.1:{d.http[1]}/api/state", timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "NotPairedError"

    # Pair this browser: Hark asks aloud, the person presses.
    browser("click", selector="#pair-browser")
    assert asking(d), d.log()
    shot(browser, "2-asking")
    hark(d, "button", "press")
    browser("wait_text", selector="#version", contains="Hark ", timeout=30000)
    assert browser("visible", selector="#unlocked")
    cookie = next(c for c in browser("cookies") if c["name"] == "hark_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"].startswith("hark_")
    browser_token = [n for n in tokens(d) if n.startswith("browser-")]
    assert len(browser_token) == 1 and tokens(d)[browser_token[0]]["scopes"] == ["listen", "speak", "files", "admin"]
    shot(browser, "3-paired")

    # Live: an agent starts listening; the page shows it without reloading.
    local = LineClient.unix(d, timeout=30)
    local.initialize("kitchen-agent")
    local.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "transcribe_voice", "arguments": {"timeout_seconds": 6}}})
    browser("wait_text", selector="#now-mic", contains="open", timeout=10000)
    browser("wait_text", selector="#lights", contains="listening", timeout=10000)
    browser("wait_text", selector="#now-floor", contains="kitchen-agent", timeout=10000)
    shot(browser, "4-listening")
    response(local, 7)
    browser("wait_text", selector="#now-mic", contains="closed", timeout=10000)
    local.close()
    assert browser("errors") == []


def test_the_page_approves_a_pairing_revokes_and_refuses_other_origins(appliance, browser):
    d = appliance
    base = f"http://127.0.0.1:{d.http[1]}"
    # An admin token opens the page too.
    admin = json.loads(hark(d, "token", "create", "page-admin", "--scopes", "all", "--json").stdout)["token"]
    browser("goto", url=base + "/")
    browser("wait_text", selector="#locked h2", contains="not paired")
    r = browser("fetch", url="/api/login", method="POST", body=json.dumps({"token": admin}))
    assert r["status"] == 200, r
    browser("goto", url=base + "/")
    browser("wait_text", selector="#version", contains="Hark ")

    # Another agent asks to pair; the page shows it and allows it.
    c = raw_pair(d, {"name": "garden-agent"}, source="127.0.0.9")
    browser("wait_text", selector="#pairing-who", contains="garden-agent", timeout=20000)
    assert "127.0.0.9" in browser("text", selector="#pairing-who")
    shot(browser, "5-pairing")
    browser("click", selector="#pairing-approve")
    reply, _ = response(c, "pair")
    c.close()
    assert reply["result"]["name"] == "garden-agent", reply
    assert wait_for(lambda: lights(d) != "pairing", 10)

    # It is listed; revoking it from the page ends it.
    browser("wait_text", selector="#tokens", contains="garden-agent", timeout=10000)
    # A refresh leaves an unchanged table's rows in place: a row rebuilt
    # under the pointer would lose a click begun on the old one.
    revoke = 'document.querySelector(\'button[data-revoke="garden-agent"]\')'
    browser("eval", script=f"{revoke}.handle = 'the one shown'")
    browser("eval", script="refresh()")
    assert browser("eval", script=f"{revoke}.handle") == "the one shown"
    # So does a table whose only change is a last use: the page's own token
    # is used by every refresh, a second later another time.
    before = browser("text", selector="#tokens")
    time.sleep(1.1)
    browser("eval", script="refresh()")
    assert wait_for(lambda: browser("text", selector="#tokens") != before, 10), before
    assert browser("eval", script=f"{revoke}.handle") == "the one shown"
    browser("click", selector='button[data-revoke="garden-agent"]')
    assert wait_for(lambda: "garden-agent" not in tokens(d), 10), browser("text", selector="#error")
    # A changed table is rebuilt.
    browser("wait_text", selector="#tokens", contains="page-admin")
    assert wait_for(lambda: "garden-agent" not in browser("text", selector="#tokens"), 10)
    t = LineClient.tcp(d, timeout=10)
    refused = t.request("hark/auth", {"token": reply["result"]["token"]}, id="a")
    assert refused["error"]["code"] == -32001
    t.close()
    shot(browser, "6-revoked")

    # Another origin, even carrying the browser's cookie: refused, unchanged.
    session = next(x for x in browser("cookies") if x["name"] == "hark_session")["value"]
    before = call(LineClient.unix(d), "get_status", {})["structuredContent"]["volume"]
    for headers in [{"Origin": "http://evil.example"}, {"Origin": "http://127.0.0.1:1"}, {}]:
        r = httpx.post(base + "/api/volume", json={"volume": 3}, timeout=10,
                       headers={**headers, "Cookie": f"hark_session={session}"})
        assert r.status_code == 403, (headers, r.status_code, r.text)
    assert call(LineClient.unix(d), "get_status", {})["structuredContent"]["volume"] == before
    # From the page itself it works.
    r = browser("fetch", url="/api/volume", method="POST", body=json.dumps({"volume": 42}))
    assert r["status"] == 200 and json.loads(r["body"])["volume"] == 42, r
    # Bad input is named.
    r = browser("fetch", url="/api/volume", method="POST", body=json.dumps({"volume": 400}))
    assert r["status"] == 400 and "0–100" in r["body"], r
    r = browser("fetch", url="/api/volume", method="POST", body=json.dumps({"loudness": 4}))
    assert r["status"] == 400 and "loudness" in r["body"], r
    # A token in the URL is refused as everywhere.
    assert httpx.get(base + "/api/state?token=" + admin, timeout=10).status_code == 400
    assert browser("errors") == []


def test_refusing_a_browser_leaves_it_locked_out(appliance, browser):
    d = appliance
    browser("goto", url=f"http://127.0.0.1:{d.http[1]}/")
    browser("wait_text", selector="#locked h2", contains="not paired")
    browser("click", selector="#pair-browser")
    assert asking(d)
    hark(d, "button", "hold")
    time.sleep(1.2)
    hark(d, "button", "release")
    browser("wait_text", selector="#pair-progress", contains="refused", timeout=15000)
    assert not browser("visible", selector="#unlocked")
    assert not [c for c in browser("cookies") if c["name"] == "hark_session"]


def test_open_mode_opens_the_page_to_everyone_and_says_so(start_daemon, browser):
    d = start_daemon({"auth": {"mode": "open"}})
    browser("goto", url=f"http://127.0.0.1:{d.http[1]}/")
    browser("wait_text", selector="#warning", contains="open", timeout=10000)
    assert "without pairing" in browser("text", selector="#warning")
    assert browser("visible", selector="#unlocked")
    shot(browser, "7-open-mode")


def test_the_page_shows_the_wake_word_and_sets_it(start_daemon, browser, tmp_path):
    """The wake word's state, its detections with their scores, and the
    switch and sensitivity the person sets from the page."""
    from test_wake import clip, wake_status

    d = start_daemon({"auth": {"mode": "open"}, "wake": {"enabled": True}, "inbox": {"listen_seconds": 1}})
    url = f"http://127.0.0.1:{d.http[1]}/"
    browser("goto", url=url)
    browser("wait_text", selector="#wake-state", contains="listening: okay_nabu", timeout=10000)
    hark(d, "inject", str(clip(tmp_path, "wake", 0.3, "Okay Nabu.", 0.5)))
    browser("wait_text", selector="#wake-detections", contains="okay_nabu", timeout=15000)
    row = browser("text", selector="#wake-detections tbody tr")
    score = wake_status(d)["detections"][0]["score"]
    assert f"{score:.3f}" in row and "yes" in row, row
    shot(browser, "8-wake-word")
    browser("select", selector="#wake-sensitivity", value="low")
    assert wait_for(lambda: wake_status(d)["sensitivity"] == "low", 5)
    browser("click", selector="#wake-on")
    assert wait_for(lambda: wake_status(d)["state"] == "off", 5)
    browser("wait_text", selector="#wake-state", contains="off", timeout=5000)
    bad = browser("fetch", url=url + "api/wake", method="POST", body=json.dumps({"sensitivity": "loud"}))
    assert bad["status"] == 400 and "not one of low, default, high" in bad["body"], bad
    assert wake_status(d)["sensitivity"] == "low"
    assert browser("errors") == []


def test_the_page_shows_what_is_kept_for_later_and_cancels_it(start_daemon, browser):
    from test_timers import scheduled

    d = start_daemon({"auth": {"mode": "open"}})
    c = LineClient.tcp(d, timeout=30)
    c.initialize("cook")
    r = call(c, "speak_text", {"text": "Take the bread out.", "delay_seconds": 900, "ring": True}, 2)
    c.close()
    assert r["structuredContent"]["status"] == "scheduled", r
    browser("goto", url=f"http://127.0.0.1:{d.http[1]}/")
    browser("wait_text", selector="#scheduled", contains="Take the bread out.", timeout=10000)
    row = browser("text", selector="#scheduled tbody tr")
    assert "timer" in row and "cook" in row, row
    shot(browser, "9-kept-for-later")
    browser("click", selector="#scheduled tbody button")
    assert wait_for(lambda: scheduled(d) == [], 5)
    assert wait_for(lambda: not browser("visible", selector="#later"), 5), "the empty list is hidden"
    assert browser("errors") == []


def test_an_agent_is_added_from_any_browser_and_its_lines_work(appliance, browser, tmp_path):
    """"Add an agent" on a browser that is not paired: the person presses the
    button, the page shows the token once with each client's lines, and the
    lines work as shown (the clients that run here run them; the others'
    files are read as those clients read them and their URL and header used)."""
    import shlex
    import sys
    import tomllib

    import anyio
    from mcp import Client, StdioServerParameters

    d = appliance
    url = f"http://127.0.0.1:{d.http[1]}/"
    browser("goto", url=url)
    browser("wait_text", selector="#locked h2", contains="not paired")
    browser("fill", selector="#add-agent-name", value="desk-laptop")
    browser("click", selector="#add-agent-ask")
    assert asking(d), d.log()
    hark(d, "button", "press")
    browser("wait_text", selector="#add-agent-progress", contains="Allowed", timeout=30000)
    shot(browser, "9-agent-added")
    token = browser("text", selector="#add-agent-token")
    assert token.startswith("hark_")
    assert tokens(d)["desk-laptop"]["scopes"] == ["listen", "speak"]
    lines = {s["client"]: s for s in browser("eval", script="""
        Array.from(document.querySelectorAll('#add-agent-lines section')).map(s => (
          {client: s.dataset.client, title: s.querySelector('h3').textContent, text: s.querySelector('pre').textContent}))""")}
    assert list(lines) == ["claude-code", "hark-connect", "claude-desktop", "cursor", "windsurf", "vscode", "codex",
                           "python"]
    mcp_url = f"http://127.0.0.1:{d.http[1]}/mcp"

    def works(endpoint, headers):
        r = httpx.post(endpoint, headers={**headers, "content-type": "application/json", "accept": "application/json"},
                       json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "speak_text", "arguments": {"text": "Hello."}}}, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["result"]["structuredContent"]["status"] == "queued"

    # Claude Code: its command line, read as the shell reads it.
    args = shlex.split(lines["claude-code"]["text"])
    assert args[:6] == ["claude", "mcp", "add", "--transport", "http", "hark"] and args[6] == mcp_url
    assert works(args[6], dict([args[8].split(": ", 1)]))
    # Cursor, Windsurf and VS Code: their files.
    for client, key, servers in [("cursor", "url", "mcpServers"), ("windsurf", "serverUrl", "mcpServers"),
                                 ("vscode", "url", "servers")]:
        entry = json.loads(lines[client]["text"])[servers]["hark"]
        assert works(entry[key], entry["headers"]), client
    # Codex: its TOML, the token from the environment variable it names.
    codex = tomllib.loads(lines["codex"]["text"])["mcp_servers"]["hark"]
    assert codex["tool_timeout_sec"] >= 600 and f"HARK_TOKEN={token}" in lines["codex"]["text"]
    assert works(codex["url"], {"Authorization": f"Bearer {token}"})
    # The bridge: installed from the appliance as the line says (pip where
    # pipx would be: both install a wheel from a URL, pipx into a venv).
    pipx = shlex.split(lines["hark-connect"]["text"])
    assert pipx[:2] == ["pipx", "install"] and pipx[2].startswith(url + "hark-connect/"), pipx
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                                "--no-index", "--no-deps", pipx[2]], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    # Claude Desktop: the stdio bridge started as its config says.
    desktop = json.loads(lines["claude-desktop"]["text"])["mcpServers"]["hark"]
    assert desktop["command"] == "hark-connect" and desktop["args"][1:] == ["--token", token]
    bridge = StdioServerParameters(command=str(venv / "bin" / "hark-connect"), args=desktop["args"])

    async def through_bridge():
        async with Client(bridge, mode="legacy", cache=None) as client:
            return (await client.call_tool("speak_text", {"text": "Hi."})).structured_content["status"]

    assert anyio.run(through_bridge) == "queued"
    # Python: the program as shown.
    program = tmp_path / "hark_status.py"
    program.write_text(lines["python"]["text"])
    ran = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "'recording': False" in ran.stdout, ran.stderr
    # Shown once: a reload does not show it again.
    browser("goto", url=url)
    assert not browser("visible", selector="#add-agent-result")
    assert browser("errors") == []


def test_the_page_changes_an_agents_voice_rate_chime_and_aliases(start_daemon, browser):
    """Voicebox's settings page, here: each agent's row of fields, saved
    (applied and kept: test_agent_settings follows a change to the agent's
    next speech and across a restart), refused with the reason, reset."""
    d = start_daemon({"auth": {"mode": "open"}, "agents.claude-code": {"aliases": ["claude"]}})
    admin = LineClient.tcp(d, timeout=30)
    admin.initialize("admin")
    browser("goto", url=f"http://127.0.0.1:{d.http[1]}/")
    browser("wait_text", selector="#agents", contains="claude-code", timeout=10000)
    row = '#agents tr[data-agent="claude-code"]'
    assert "hark.toml" in browser("text", selector=row)
    browser("select", selector=f'{row} select[name="voice"]', value="default")
    browser("select", selector=f'{row} select[name="chime"]', value="low")
    browser("fill", selector=f'{row} input[name="rate"]', value="1.25")
    browser("fill", selector=f'{row} input[name="aliases"]', value="claude, the coder")
    browser("click", selector=f'{row} button[data-save]')

    def claude():
        agents = call(admin, "agent_settings", {"agent": "claude-code"}, 2)["structuredContent"]["agents"]
        return agents[0]
    assert wait_for(lambda: claude()["source"] == "run_time", 5), claude()
    now = claude()
    assert (now["chime"], now["rate"], now["aliases"]) == ("low", 1.25, ["claude", "the coder"]), now
    browser("wait_text", selector=row, contains="changed here", timeout=5000)
    shot(browser, "11-agent-settings")
    # A bad value is refused with the reason on the page, nothing changed.
    browser("fill", selector=f'{row} input[name="rate"]', value="7")
    browser("click", selector=f'{row} button[data-save]')
    browser("wait_text", selector="#error", contains="rate", timeout=5000)
    assert claude()["rate"] == 1.25
    browser("click", selector=f'{row} button[data-reset]')
    assert wait_for(lambda: claude()["source"] == "config", 5), claude()
    assert claude()["chime"] == "default"
    assert browser("errors") == []
    admin.close()
