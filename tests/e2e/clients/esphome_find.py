"""Home Assistant's way to an ESPHome device, from another host: browse
`_esphomelib._tcp` by mDNS (zeroconf, as Home Assistant does), then connect
with aioesphomeapi expecting the advertised instance as the device's name.
Prints one JSON line: what was found and what the device said."""

import asyncio
import json
import sys

from aioesphomeapi import APIClient
from zeroconf import ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

TYPE = "_esphomelib._tcp.local."


async def main(seconds: float) -> None:
    zc = AsyncZeroconf()
    names: list[str] = []

    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Added:
            names.append(name)

    browser = AsyncServiceBrowser(zc.zeroconf, [TYPE], handlers=[changed])
    await asyncio.sleep(seconds)
    found = []
    for name in names:
        info = AsyncServiceInfo(TYPE, name)
        if not await info.async_request(zc.zeroconf, 3000):
            continue
        props = {k.decode(): (v.decode() if v else "") for k, v in info.properties.items()}
        instance = name.removesuffix("." + TYPE)
        entry = {"instance": instance, "port": info.port, "addresses": info.parsed_addresses(),
                 "properties": props}
        client = APIClient(info.parsed_addresses()[0], info.port, None, expected_name=instance)
        await client.connect(login=True)
        device = await client.device_info()
        await client.disconnect()
        entry["device"] = {"name": device.name, "mac": device.mac_address,
                           "friendly_name": device.friendly_name}
        found.append(entry)
    await browser.async_cancel()
    await zc.async_close()
    print(json.dumps(found))


asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 4))
