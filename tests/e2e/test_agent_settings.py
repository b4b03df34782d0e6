"""Per-agent settings at run time, as a Voicebox user changes them in its
settings page: `agent_settings` (admin) shows and changes an agent's voice,
rate, chime, aliases and announcing; the change applies to the agent's
next call at once, outlasts a restart, and a reset brings `hark.toml`'s
back. (The status page's form is driven in a real browser in test_page.)"""

from harness import Daemon, call, client, new_token

CONFIG = {"agents.claude-code": {"aliases": ["claude"], "rate": 1.1, "earcon": "high"}}


def settings(c, args=None, id=1):
    r = call(c, "agent_settings", args or {}, id)
    assert not r["isError"], r
    return r["structuredContent"]


def by_name(listing):
    return {a["name"]: a for a in listing["agents"]}


def error_of(r):
    assert r["isError"], r
    return r["structuredContent"]["error"]["type"], r["content"][0]["text"]


def spoken(c, text, id):
    r = call(c, "speak_text", {"text": text, "wait": True}, id)
    assert not r["isError"], r
    return r["structuredContent"]


def test_settings_change_at_once_outlast_a_restart_and_reset(start_daemon):
    d = start_daemon(CONFIG)
    new_token(d, "cursor", "listen,speak")
    admin = client(d, "admin", 60)
    listing = settings(admin)
    agents = by_name(listing)
    # hark.toml's agent, and a paired agent with the defaults.
    claude, cursor = agents["claude-code"], agents["cursor"]
    assert (claude["source"], claude["aliases"], claude["rate"], claude["chime"]) == \
        ("config", ["claude"], 1.1, "high"), claude
    assert (cursor["source"], cursor["voice"], cursor["rate"], cursor["chime"], cursor["announce"]) == \
        ("defaults", None, None, "default", True), cursor
    default_voice = listing["default_voice"]
    assert "agents.sqlite3" in listing["kept"], listing

    # The agent speaks in the appliance's voice until its settings change.
    agent = client(d, "cursor", 60)
    assert spoken(agent, "Before.", 2)["voice"] == default_voice
    changed = settings(admin, {"agent": "Cursor", "voice": "espeak:de", "rate": 1.4, "chime": "triple",
                               "aliases": ["the editor", " the editor ", "ed"], "announce": False}, 3)
    view = changed["agents"]
    assert len(view) == 1 and view[0]["name"] == "cursor", changed
    assert (view[0]["voice"], view[0]["rate"], view[0]["chime"], view[0]["aliases"], view[0]["announce"],
            view[0]["source"]) == ("espeak:de", 1.4, "triple", ["the editor", "ed"], False, "run_time"), view
    # Applied at once: the same connection's next speech.
    said = spoken(agent, "After.", 4)
    assert (said["voice"], said["engine"]) == ("espeak:de", "espeak"), said
    # An alias is the agent too.
    assert by_name(settings(admin, {"agent": "the editor"}, 5))["cursor"]["rate"] == 1.4

    # What cannot be: clear errors, nothing changed.
    kind, text = error_of(call(admin, "agent_settings", {"agent": "cursor", "voice": "xx_XX-nobody-low"}, 6))
    assert kind == "VoiceNotFoundError" and default_voice in text, text
    kind, text = error_of(call(admin, "agent_settings", {"agent": "cursor", "voice": "espeak:en-gb"}, 6))
    assert kind == "VoiceNotFoundError" and "espeak-ng has no voice `en-gb`" in text, text
    kind, text = error_of(call(admin, "agent_settings", {"agent": "cursor", "rate": 3}, 7))
    assert kind == "InvalidArgumentError" and "rate" in text, text
    kind, text = error_of(call(admin, "agent_settings", {"agent": "cursor", "aliases": ["Claude"]}, 8))
    assert kind == "InvalidArgumentError" and "`claude-code`" in text, text
    kind, text = error_of(call(admin, "agent_settings", {"agent": "cursor", "aliases": ["!!!"]}, 9))
    assert kind == "InvalidArgumentError" and "letters or digits" in text, text
    kind, _ = error_of(call(admin, "agent_settings", {"voice": "default"}, 10))
    assert kind == "InvalidArgumentError"
    # A setting Hark does not have is refused, not ignored.
    reply = admin.call_tool("agent_settings", {"agent": "cursor", "pitch": 2}, id=11)
    refused = reply.get("error") or reply["result"]
    assert "pitch" in str(refused) and (reply.get("error") or reply["result"]["isError"]), reply
    assert by_name(settings(admin, {}, 12))["cursor"]["voice"] == "espeak:de"

    # hark.toml's agent changed by its alias: its own name keeps it.
    changed = settings(admin, {"agent": "claude", "rate": 0.8}, 13)["agents"][0]
    assert (changed["name"], changed["rate"], changed["aliases"], changed["source"]) == \
        ("claude-code", 0.8, ["claude"], "run_time"), changed
    agent.close()
    admin.close()

    # A restart keeps both changes.
    assert d.stop() == 0
    again = Daemon(d.tmp, CONFIG).start()
    try:
        admin = client(again, "admin", 60)
        agents = by_name(settings(admin))
        assert (agents["cursor"]["voice"], agents["cursor"]["source"]) == ("espeak:de", "run_time"), agents
        assert agents["claude-code"]["rate"] == 0.8, agents
        agent = client(again, "cursor", 60)
        assert spoken(agent, "Still me.", 2)["voice"] == "espeak:de"
        # Reset: hark.toml's settings, or the defaults, again, at once.
        back = settings(admin, {"agent": "claude-code", "reset": True}, 3)["agents"][0]
        assert (back["rate"], back["source"]) == (1.1, "config"), back
        back = settings(admin, {"agent": "cursor", "reset": True}, 4)["agents"][0]
        assert (back["voice"], back["source"]) == (None, "defaults"), back
        assert spoken(agent, "Back.", 5)["voice"] == default_voice
        agent.close()
        admin.close()
    finally:
        assert again.stop() == 0
    # ...and the reset outlasts a restart too.
    third = Daemon(d.tmp, CONFIG).start()
    try:
        admin = client(third, "admin", 60)
        agents = by_name(settings(admin))
        assert agents["claude-code"]["source"] == "config" and "cursor" in agents, agents
        assert agents["cursor"]["source"] == "defaults", agents
        admin.close()
    finally:
        assert third.stop() == 0
