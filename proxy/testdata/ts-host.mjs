// An upstream MCP host made of the official TypeScript SDK's Client and
// StdioClientTransport, as Claude Desktop and most hosts use them. It runs
// the steps of a plan (argv[2], JSON) against one server command (or, with
// plan.url, a Streamable HTTP server) and prints one JSON line: the result
// of every step.
//
// The SDK is loaded from the npm fixture (NPM_FIXTURE, the folder holding
// its package.json), so this file needs no install of its own.
import { createRequire } from 'node:module';
import path from 'node:path';
import fs from 'node:fs';

const require = createRequire(path.join(process.env.NPM_FIXTURE, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
  LoggingMessageNotificationSchema, CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
} = require('@modelcontextprotocol/sdk/types.js');
const sdkVersion = JSON.parse(fs.readFileSync(
  path.join(process.env.NPM_FIXTURE, 'node_modules', '@modelcontextprotocol', 'sdk', 'package.json'), 'utf8')).version;

const plan = JSON.parse(process.argv[2]);
const transport = plan.url ? new StreamableHTTPClientTransport(new URL(plan.url)) : new StdioClientTransport({
  command: plan.command,
  args: plan.args ?? [],
  env: { ...process.env, ...(plan.env ?? {}) },
  stderr: 'inherit',
});
const client = new Client({ name: plan.clientName ?? 'ts-sdk-host', version: sdkVersion }, { capabilities: plan.capabilities ?? {} });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });

// What a host with a model and a user answers the server's own requests,
// for the capabilities the plan declares; each request is kept for the
// 'serverRequests' step.
const serverRequests = [];
const caps = plan.capabilities ?? {};
if (caps.sampling) {
  client.setRequestHandler(CreateMessageRequestSchema, (req) => {
    serverRequests.push({ method: req.method, params: req.params });
    const asked = req.params.messages.map((m) => m.content?.text ?? '').join(' ');
    return { model: 'ts-host-model', role: 'assistant', content: { type: 'text', text: `ts host sampled: ${asked}` } };
  });
}
if (caps.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    serverRequests.push({ method: req.method, params: req.params });
    return { action: 'accept', content: plan.elicited ?? {} };
  });
}
if (caps.roots) {
  client.setRequestHandler(ListRootsRequestSchema, (req) => {
    serverRequests.push({ method: req.method, params: req.params ?? null });
    return { roots: plan.roots ?? [] };
  });
}

function errorOf(e) {
  return { code: e?.code ?? null, message: String(e?.message ?? e) };
}

async function step(s) {
  switch (s.op) {
    case 'listTools': return client.listTools();
    case 'listToolsUntil': {
      // Lists tools until s.name is among them (a server whose tools come
      // with tools/list_changed); the bound only turns a hang into a failure.
      const deadline = Date.now() + 30000;
      for (;;) {
        const r = await client.listTools();
        if (r.tools.some((t) => t.name === s.name) || Date.now() > deadline) return r;
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    case 'listResources': return client.listResources();
    case 'readResource': return client.readResource({ uri: s.uri });
    case 'listPrompts': return client.listPrompts();
    case 'getPrompt': return client.getPrompt({ name: s.name, arguments: s.arguments ?? {} });
    case 'complete': return client.complete({ ref: s.ref, argument: s.argument });
    case 'setLevel': return client.setLoggingLevel(s.level);
    case 'serverInfo': return {
      serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities(),
      instructions: client.getInstructions() ?? null,
    };
    case 'logs': return { logs };
    case 'serverRequests': return { serverRequests };
    case 'setRoots': {
      // The host's roots change: it says so (notifications/roots/list_changed)
      // and answers the next roots/list with the new ones.
      plan.roots = s.roots;
      await client.sendRootsListChanged();
      return {};
    }
    case 'waitLog': {
      // Until the server's first log message arrives through the proxy;
      // the bound only turns a hang into a failure.
      const deadline = Date.now() + 60000;
      while (logs.length === 0) {
        if (Date.now() > deadline) throw new Error('no notifications/message within 60 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      return { logs };
    }
    case 'callUntil': {
      // Calls a tool until its text holds s.contains (a server that takes
      // its host's roots after the handshake, asynchronously); the bound
      // only turns a hang into a failure.
      const deadline = Date.now() + 30000;
      for (;;) {
        const r = await client.callTool({ name: s.name, arguments: s.arguments ?? {} });
        const text = (r.content ?? []).map((c) => c.text ?? '').join('\n');
        if (text.includes(s.contains) || Date.now() > deadline) return r;
        await new Promise((res) => setTimeout(res, 50));
      }
    }
    case 'call': {
      const progress = [];
      const opts = { timeout: s.timeoutMs ?? 60000 };
      if (s.progress) opts.onprogress = (p) => progress.push(p);
      if (s.abortAfterProgress) {
        // Cancel as a host does when its user presses stop: the SDK sends
        // notifications/cancelled for the request.
        const ac = new AbortController();
        opts.signal = ac.signal;
        opts.onprogress = (p) => { progress.push(p); ac.abort('user pressed stop'); };
      }
      const params = { name: s.name, arguments: s.arguments ?? {} };
      if (s.meta) params._meta = s.meta;
      const r = await client.callTool(params, undefined, opts);
      return s.progress || s.abortAfterProgress ? { result: r, progress } : r;
    }
    default: throw new Error(`unknown op ${s.op}`);
  }
}

const out = { sdk: sdkVersion, steps: [] };
try {
  await client.connect(transport);
  for (const s of plan.steps) {
    try {
      out.steps.push({ op: s.op, ok: await step(s) });
    } catch (e) {
      out.steps.push({ op: s.op, error: errorOf(e) });
    }
  }
} catch (e) {
  out.connectError = errorOf(e);
}
process.stdout.write(JSON.stringify(out) + '\n');
await client.close().catch(() => {});
process.exit(0);
