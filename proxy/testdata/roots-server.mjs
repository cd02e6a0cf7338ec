// An MCP server (the official TypeScript SDK's) whose tools/list asks the
// client for its roots and lists one tool per root, as servers that work
// per workspace folder do. Behind the proxy, that request can reach the
// host only after the host's own handshake. LIST_DELAY_MS makes every
// tools/list that much slower.
//
// The SDK is loaded from the npm fixture (NPM_FIXTURE).
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NPM_FIXTURE, 'package.json'));
const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const server = new Server({ name: 'roots-server', version: '1.0.0' }, { capabilities: { tools: {} } });
const object = { type: 'object', properties: {} };
const delay = Number(process.env.LIST_DELAY_MS ?? 0);
server.setRequestHandler(ListToolsRequestSchema, async () => {
  await new Promise((res) => setTimeout(res, delay));
  const roots = server.getClientCapabilities()?.roots ? (await server.listRoots()).roots : [];
  return {
    tools: [
      { name: 'status', inputSchema: object, annotations: { readOnlyHint: true } },
      ...roots.map((r) => ({ name: `scan-${r.name}`, description: `Scan ${r.uri}`, inputSchema: object, annotations: { readOnlyHint: true } })),
    ],
  };
});
server.setRequestHandler(CallToolRequestSchema, async (req) => ({ content: [{ type: 'text', text: `ran ${req.params.name}` }] }));
await server.connect(new StdioServerTransport());
