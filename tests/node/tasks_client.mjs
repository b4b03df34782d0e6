// An agent with a 60 s limit per request, as the TypeScript SDK has by
// default (and Codex CLI per tool call), calling one of Hark's waiting tools
// over Streamable HTTP with protocol 2026-07-28.
//
//   node tasks_client.mjs URL TOOL ARGUMENTS_JSON plain|task [TOKEN]
//
// plain: the SDK's own callTool, which gives up when its limit passes.
// task:  the official Tasks extension client (@modelcontextprotocol/ext-tasks)
//        declares the extension; Hark answers with a task and the client
//        polls tasks/get, each request well inside the limit.
//
// Prints one JSON line: what came back, when (seconds from the call), and
// the task's states as the client saw them.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const [url, tool, argsJson, mode, token] = process.argv.slice(2);
const args = JSON.parse(argsJson);
const LIMIT_MS = 60_000;
const VERSION = "2026-07-28";
const clientInfo = { name: "tasks-e2e", version: "1.0.0" };
const auth = token ? { Authorization: `Bearer ${token}` } : {};

const client = new Client(clientInfo, {
  capabilities: {},
  versionNegotiation: { mode: { pin: VERSION } },
});
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } }),
);

let nextId = 1;
// The request path the Tasks client needs for 2026-07-28 shapes the SDK's
// typed request() does not know: one POST per request, with the headers the
// revision requires, under the same 60 s limit.
async function rawDispatch(request, options = {}) {
  const message = { jsonrpc: "2.0", id: `raw-${nextId++}`, ...request };
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": VERSION,
    "Mcp-Method": message.method,
    ...auth,
  };
  if (message.method === "tools/call") headers["Mcp-Name"] = message.params.name;
  if (message.method.startsWith("tasks/")) headers["Mcp-Name"] = message.params.taskId;
  const signal = AbortSignal.any(
    [AbortSignal.timeout(LIMIT_MS), options.signal].filter(Boolean),
  );
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(message), signal });
  const text = await response.text();
  const type = response.headers.get("content-type") ?? "";
  const candidates = type.includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).filter(Boolean)
    : [text];
  for (const candidate of candidates) {
    const reply = JSON.parse(candidate);
    if (reply.id !== message.id) continue;
    if (reply.error) return { kind: "error", error: reply };
    return { kind: "result", result: reply.result };
  }
  throw new Error(`no answer to ${message.method} (HTTP ${response.status}): ${text.slice(0, 300)}`);
}

const started = Date.now();
const elapsed = () => (Date.now() - started) / 1000;
const out = { mode, tool };
try {
  if (mode === "plain") {
    const result = await client.callTool({ name: tool, arguments: args }, { timeout: LIMIT_MS });
    Object.assign(out, { outcome: "result", result });
  } else {
    const session = createTaskSessionFromClient(client, {
      endpointId: url,
      rawDispatch,
      v2RequestFraming: { protocolVersion: VERSION, clientInfo, clientCapabilities: {} },
    });
    const execution = await session.callTool(tool, args);
    out.kind = execution.kind;
    const states = [];
    const { outcome } = await execution.settle({
      onEvent: (event) => {
        if (event.type === "task") {
          const last = states.at(-1);
          const state = { status: event.task.status, message: event.task.statusMessage ?? null };
          if (!last || last.status !== state.status || last.message !== state.message) {
            states.push({ ...state, at: elapsed() });
          }
          out.taskId = event.task.taskId;
          out.pollIntervalMs = event.task.suggestedPollIntervalMs;
        }
      },
    });
    Object.assign(out, { outcome: outcome.status, result: outcome.result ?? null, states });
    await session.close();
  }
} catch (error) {
  Object.assign(out, { outcome: "error", error: String(error?.message ?? error), code: error?.code ?? null });
}
out.seconds = elapsed();
console.log(JSON.stringify(out));
await client.close();
process.exit(0);
