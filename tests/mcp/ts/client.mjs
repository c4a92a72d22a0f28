// The official MCP TypeScript SDK as a client of `strobe mcp` (run by
// tests/mcp/test_typescript_sdk.py from target/ts-sdk, where the SDK is installed).
// It lists the tools and calls some, checking what the SDK parsed: titles, annotations,
// outputSchema and structuredContent (the SDK itself validates structuredContent
// against the outputSchema, with ajv, on every call). Exits non-zero on the first failure.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const transport = new StdioClientTransport({ command: process.env.STROBE_BIN, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "strobe-ts-sdk-test", version: "0" });
await client.connect(transport);

const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
const query = byName.debug_query;
assert.ok(query, "debug_query is listed");
assert.equal(query.title, "Query the event timeline");
assert.deepEqual(query.annotations, {
  title: "Query the event timeline", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false,
});
assert.equal(query.outputSchema.type, "object");
assert.equal(byName.debug_session.annotations.destructiveHint, true);
assert.equal(byName.debug_launch.annotations.openWorldHint, true);
assert.equal(byName.debug_memory.outputSchema, undefined, "debug_memory declares no output shape");

// A structured answer: the SDK validated it against outputSchema before returning it.
const list = await client.callTool({ name: "debug_session", arguments: { action: "list" } });
assert.ok(!list.isError, JSON.stringify(list));
assert.ok(Array.isArray(list.structuredContent.sessions), JSON.stringify(list));
assert.deepEqual(list.structuredContent, JSON.parse(list.content[0].text), "the text holds the same JSON");

// A tool error: isError with a spec code, no structuredContent.
const err = await client.callTool({ name: "debug_query", arguments: { sessionId: "no-such-session" } });
assert.equal(err.isError, true);
assert.equal(err.structuredContent, undefined);
assert.equal(JSON.parse(err.content[0].text).error, "SESSION_NOT_FOUND");

// Invalid arguments: VALIDATION_ERROR naming the field.
const bad = await client.callTool({ name: "debug_query", arguments: { sessionId: "x", limit: 5.5 } });
assert.equal(bad.isError, true);
assert.match(JSON.parse(bad.content[0].text).message, /args\.limit must be an integer, got number 5\.5/);

await client.close();
console.log(`ok: ${tools.length} tools`);
