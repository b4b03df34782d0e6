"""Discovery on the LAN, end to end: the daemon advertises `_mcp._tcp` and
`_hark._tcp` by mDNS on an interface the test made (one end of a veth
pair), `hark discover` in the other network namespace finds it with its
addresses, ports and access, and `hark pair` without a host pairs with the
one it finds; a stopped daemon is gone from the LAN. With avahi running
(or asked for), the records go to avahi's service file instead, so one
responder answers for each name."""

import json
import os
import re
import subprocess

from harness import HARK, REPO, hark, wait_for
from test_auth import other_host, veth_names  # noqa: F401  (the fixture)
from test_pairing import asking, tokens

LAN = {"mcp.tcp": {"listen": "0.0.0.0:0"}, "mcp.http": {"listen": "0.0.0.0:0"}}


def discover(ns, *args):
    r = subprocess.run(["ip", "netns", "exec", ns, str(HARK), "discover", *args], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_appliance_is_found_from_another_host_and_paired_without_an_address(start_daemon, other_host,  # noqa: F811
                                                                                 tmp_path):
    ns, address = other_host
    here, _ = veth_names()
    name = f"hark-disc-{os.getpid() % 10000}"
    d = start_daemon(dict(LAN, service={"hostname": name}, discovery={
        "enabled": True, "interfaces": [here], "name": "Hark in the test room",
        # Auto, with no avahi here: Hark answers itself.
        "avahi_socket": str(tmp_path / "no-avahi.socket")},
        esphome={"enabled": True, "listen": "0.0.0.0:0"}))
    assert "advertised on the LAN" in d.log() and "mDNS" in d.log(), d.log()
    found = json.loads(discover(ns, "--json", "--timeout", "4"))
    ours = [f for f in found if f["host"] == f"{name}.local"]
    assert len(ours) == 1, found
    f = ours[0]
    assert f["name"] == "Hark in the test room"
    assert address in f["addresses"]
    assert (f["tcp_port"], f["http_port"], f["path"]) == (d.tcp[1], d.http[1], "/mcp")
    assert f["auth"] == "paired" and f["version"]
    table = discover(ns, "--timeout", "3")
    assert "Hark in the test room" in table and "pair first" in table, table

    # Home Assistant finds the satellite the way it finds ESPHome devices,
    # and its name is the one the device says in its hello.
    r = subprocess.run(["ip", "netns", "exec", ns, str(REPO / "tests" / ".venv" / "bin" / "python"),
                        str(REPO / "tests" / "e2e" / "clients" / "esphome_find.py"), "4"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    satellites = [s for s in json.loads(r.stdout) if s["instance"] == name]
    assert len(satellites) == 1, r.stdout
    satellite = satellites[0]
    assert satellite["port"] == d.esphome[1] and address in satellite["addresses"]
    assert satellite["device"]["name"] == name
    assert satellite["properties"]["mac"] == satellite["device"]["mac"].replace(":", "").lower()
    assert satellite["properties"]["friendly_name"] == satellite["device"]["friendly_name"]

    # `hark pair` with no host pairs with the appliance it finds.
    home = tmp_path / "home"
    home.mkdir()
    p = subprocess.Popen(["ip", "netns", "exec", ns, str(HARK), "pair", "--name", "finder"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=""))
    assert asking(d, 30), d.log()
    hark(d, "button", "press")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert f"Found Hark in the test room at {address}" in err, err
    assert "finder" in tokens(d)

    # Stopped, it says goodbye: nobody answers any more.
    assert d.stop() == 0
    found = json.loads(discover(ns, "--json", "--timeout", "3"))
    assert not [f for f in found if f["host"] == f"{name}.local"], found


def test_with_avahi_the_records_go_to_its_service_file(start_daemon, tmp_path):
    service = tmp_path / "hark.service"
    service.write_text("")  # what the package makes, owned by the service
    socket_file = tmp_path / "avahi.socket"
    socket_file.write_text("")  # avahi-daemon runs
    satellite = tmp_path / "hark-esphome.service"
    satellite.write_text("")
    d = start_daemon(dict(LAN, service={"hostname": "kitchen"}, discovery={
        "enabled": True, "avahi_service_file": str(service), "avahi_esphome_file": str(satellite),
        "avahi_socket": str(socket_file)},
        wyoming={"enabled": True, "listen": "0.0.0.0:0"}, esphome={"enabled": True, "listen": "0.0.0.0:0"}))
    xml = service.read_text()
    # The satellite in a group of its own, named as the device says in its
    # hello: Home Assistant keys it on that name and the MAC.
    esphome = satellite.read_text()
    assert "<name>kitchen</name>" in esphome, esphome
    assert f"<type>_esphomelib._tcp</type>\n    <port>{d.esphome[1]}</port>" in esphome, esphome
    assert re.search(r"<txt-record>mac=[0-9a-f]{12}</txt-record>", esphome), esphome
    assert "<txt-record>friendly_name=" in esphome and "_esphomelib" not in xml
    # Home Assistant finds the Wyoming services by their own type.
    assert f"<type>_wyoming._tcp</type>\n    <port>{d.wyoming[1]}</port>" in xml, xml
    assert "<type>_mcp._tcp</type>" in xml and f"<port>{d.http[1]}</port>" in xml, xml
    assert "<txt-record>path=/mcp</txt-record>" in xml and "<txt-record>auth=paired</txt-record>" in xml
    assert f"<type>_hark._tcp</type>\n    <port>{d.tcp[1]}</port>" in xml
    assert "through avahi" in d.log()
    assert d.stop() == 0
    for file in (service, satellite):
        stopped = file.read_text()
        assert "<service-group>" in stopped and "<service>" not in stopped, "withdrawn when it stops"

    # Open mode says so; a transport on loopback only is not advertised.
    d = start_daemon({"mcp.http": {"listen": "0.0.0.0:0"}, "auth": {"mode": "open"}, "discovery": {
        "enabled": True, "responder": "avahi", "avahi_service_file": str(service)}})
    xml = service.read_text()
    assert "<txt-record>auth=open</txt-record>" in xml and "_hark._tcp" not in xml, xml
    assert "<txt-record>transports=http,websocket</txt-record>" in xml
    assert d.stop() == 0

    # An unwritable file with avahi asked for: said, and the daemon serves on.
    d = start_daemon(dict(LAN, discovery={
        "enabled": True, "responder": "avahi", "avahi_service_file": str(tmp_path / "no" / "such.service")}))
    assert wait_for(lambda: "cannot advertise the appliance on the LAN" in d.log(), 5), d.log()
    assert "no/such.service" in d.log()
