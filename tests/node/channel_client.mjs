// A Claude Code-like session for Hark's channel pushes: the TypeScript SDK
// over Streamable HTTP (a session before 2026-07-28, as Claude Code keeps),
// optionally with the header `claude mcp add --header` would send.
//
//   node channel_client.mjs URL NAME SECONDS [HEADER_VALUE]
//
// Prints one JSON line per notification it did not expect (the SDK hands
// those to fallbackNotificationHandler), then, after SECONDS, one line with
// the server's capabilities.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, name, seconds, header] = process.argv.slice(2);
const headers = header ? { "X-Hark-Channel": header } : {};
const client = new Client({ name, version: "1.0.0" }, { capabilities: {} });
client.fallbackNotificationHandler = async (notification) => {
  console.log(JSON.stringify({ notification, at: Date.now() / 1000 }));
};
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
console.log(JSON.stringify({ ready: true }));
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
console.log(JSON.stringify({ capabilities: client.getServerCapabilities() }));
await client.close();
process.exit(0);
