// Interop test: the official A2A JavaScript SDK client (@a2a-js/sdk, pinned
// in package.json) against a running a2abus.
//
//   A2ABUS_URL=http://127.0.0.1:8080 node --test interop.test.mjs
//
// a2abus must serve the agents "echo" and "tck" (see README.md). Every
// client is built the way an SDK user builds one: the agent card is fetched
// with the SDK's card resolver and a ClientFactory picks the interface from
// the card's supportedInterfaces. The same checks run over each binding the
// SDK can speak and a2abus offers: JSON-RPC 1.0, HTTP+JSON 1.0, (through
// the SDK's v0.3 compat layer) JSON-RPC 0.3, and gRPC 1.0 when a2abus
// serves it (A2ABUS_GRPC=HOST:PORT, its --grpc-listen).
//
// Only node:test and node:assert are used; nothing sleeps to synchronise:
// polling loops run against a deadline and every call carries an abort
// signal, so a server that hangs fails the test instead of blocking it.

import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import {
  A2AError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import { isLegacyAgentCard, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import * as grpc from '@grpc/grpc-js';

const BASE = (process.env.A2ABUS_URL ?? '').replace(/\/+$/, '');
if (!BASE) {
  throw new Error('set A2ABUS_URL to the base URL of a running a2abus, e.g. http://127.0.0.1:8080');
}
const agentURL = (name) => `${BASE}/agents/${name}`;
// The address a2abus serves its gRPC binding on, if it does.
const GRPC = process.env.A2ABUS_GRPC ?? '';

// How long one call may take, and how long a task may take to finish.
const CALL_TIMEOUT_MS = 15_000;
const TASK_DEADLINE_MS = 20_000;
// The API key (below) also goes as a service parameter: the SDK's gRPC
// transport carries those as metadata, where a2abus reads credentials.
const opts = () => ({
  signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
  ...(process.env.A2ABUS_API_KEY ? { serviceParameters: { authorization: `Bearer ${process.env.A2ABUS_API_KEY}` } } : {}),
});

// A2ABUS_INTEROP_TRACE=1 prints every HTTP exchange the SDK makes (request
// line, A2A-Version, body; response status, content type, body), which is
// what a bug report against a2abus needs.
const TRACE = process.env.A2ABUS_INTEROP_TRACE === '1';
// A2ABUS_API_KEY set: the edge authenticates (ci.sh runs the suite a
// second time against an a2abus with API keys). The key goes on every
// request the SDK makes as a bearer token, through fetchImpl, the SDK's
// extension point for what a transport sends.
const API_KEY = process.env.A2ABUS_API_KEY ?? '';
async function tracingFetch(input, init = {}) {
  if (API_KEY) {
    const headers = new Headers(init.headers);
    headers.set('Authorization', `Bearer ${API_KEY}`);
    init = { ...init, headers };
  }
  const res = await fetch(input, init);
  if (!TRACE) return res;
  const h = new Headers(init.headers);
  const lines = [
    `> ${init.method ?? 'GET'} ${input} A2A-Version: ${h.get('A2A-Version') ?? '-'} Accept: ${h.get('Accept') ?? '-'}`,
  ];
  if (init.body) lines.push(`> ${init.body}`);
  lines.push(`< ${res.status} ${res.headers.get('Content-Type') ?? ''}`);
  // A clone tees the body, so streams are logged once they end without
  // delaying the SDK, which reads the original.
  res
    .clone()
    .text()
    .then((body) => console.error([...lines, ...body.trim().split('\n').map((l) => `< ${l}`)].join('\n') + '\n'))
    .catch((e) => console.error([...lines, `< (body: ${e})`].join('\n')));
  return res;
}
const fetchImpl = tracingFetch;

// The bindings checked. `version` is the AgentInterface.protocolVersion the
// client must end up on; the factory is the SDK's, with its v0.3 compat
// layer enabled for the 0.3 binding (it then speaks message/send etc.).
const TRANSPORTS = [
  {
    name: 'JSON-RPC 1.0',
    binding: 'JSONRPC',
    version: '1.0',
    factory: () => new JsonRpcTransportFactory({ fetchImpl }),
    listTasks: true,
  },
  {
    name: 'HTTP+JSON 1.0',
    binding: 'HTTP+JSON',
    version: '1.0',
    factory: () => new RestTransportFactory({ fetchImpl }),
    listTasks: true,
  },
  {
    name: 'JSON-RPC 0.3',
    binding: 'JSONRPC',
    version: '0.3',
    factory: () => new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } }),
    // v0.3 had no tasks/list; the SDK's compat transport refuses it locally.
    listTasks: false,
  },
  ...(GRPC
    ? [
        {
          name: 'gRPC 1.0',
          binding: 'GRPC',
          version: '1.0',
          // The SDK copies the interface's tenant (agents/<name>) into every
          // request, which is how a gRPC call names its agent.
          factory: () => new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createInsecure() }),
          listTasks: true,
        },
      ]
    : []),
];

const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } });

// resolveCard fetches <agent URL>/.well-known/agent-card.json. The SDK
// resolves its card path relative to the base URL, so the base needs a
// trailing slash for an agent that lives under a path.
function resolveCard(name) {
  return resolver.resolve(`${agentURL(name)}/`);
}

const versionIs = (iface, v) => (v === '0.3' ? /^0\.3(\.|$)/ : /^1\.0(\.|$)/).test(iface.protocolVersion ?? '');

// clientFor builds a client for one binding from an agent card. For 1.0 the
// card goes to the factory as is (the factory prefers the 1.0 interface of a
// binding); for 0.3 the card is narrowed to its 0.3 interfaces, which is how
// a caller pins the legacy wire version with this SDK.
async function clientFor(card, t) {
  const chosen =
    t.version === '1.0'
      ? card
      : { ...card, supportedInterfaces: card.supportedInterfaces.filter((i) => versionIs(i, t.version)) };
  const factory = new ClientFactory({ transports: [t.factory()], cardResolver: resolver });
  const client = await factory.createFromAgentCard(chosen);
  assert.equal(client.transport.protocolName, t.binding, `${t.name}: factory picked transport ${client.transport.protocolName}`);
  assert.equal(client.protocolVersion, t.version, `${t.name}: factory picked protocol version ${client.protocolVersion}`);
  return client;
}

// --- request builders (full objects, as the SDK's TypeScript types demand) ---

function userMessage(text, { messageId = `interop-${randomUUID()}`, taskId = '', contextId = '' } = {}) {
  return {
    messageId,
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function sendRequest(message, { returnImmediately = false, historyLength } = {}) {
  return {
    tenant: '',
    message,
    configuration: {
      acceptedOutputModes: ['text/plain'],
      taskPushNotificationConfig: undefined,
      historyLength,
      returnImmediately,
    },
    metadata: undefined,
  };
}

const getTaskRequest = (id, historyLength) => ({ tenant: '', id, historyLength });
const cancelRequest = (id) => ({ tenant: '', id, metadata: undefined });
const subscribeRequest = (id) => ({ tenant: '', id });
const listRequest = (contextId) => ({
  tenant: '',
  contextId,
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageSize: 50,
  pageToken: '',
  historyLength: undefined,
  statusTimestampAfter: undefined,
  includeArtifacts: true,
});

// --- result helpers ---

const stateName = (s) => TaskState[s] ?? String(s);
const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

const partsText = (parts) =>
  (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

// The echo agent streams its answer as chunks of one artifact; whatever way
// a2abus stores them (parts of one artifact, appended), the text of all
// artifacts concatenated is the text sent.
const artifactsText = (task) => (task.artifacts ?? []).map((a) => partsText(a.parts)).join('');

function assertIsTask(result, what) {
  assert.ok(result && typeof result === 'object', `${what}: no result`);
  assert.ok(!('messageId' in result) || 'status' in result, `${what}: got a Message, want a Task: ${JSON.stringify(result)}`);
  assert.ok(result.id, `${what}: task without id: ${JSON.stringify(result)}`);
  assert.ok(result.status, `${what}: task without status: ${JSON.stringify(result)}`);
}

function assertState(task, want, what) {
  assert.equal(
    stateName(task.status?.state),
    stateName(want),
    `${what}: task ${task.id} is ${stateName(task.status?.state)}, want ${stateName(want)}`,
  );
}

// pollTask calls getTask until done(task) or the deadline passes.
async function pollTask(client, id, done, what) {
  const deadline = Date.now() + TASK_DEADLINE_MS;
  let task;
  for (;;) {
    task = await client.getTask(getTaskRequest(id), opts());
    if (done(task)) return task;
    if (Date.now() > deadline) {
      assert.fail(`${what}: task ${id} still ${stateName(task.status?.state)} after ${TASK_DEADLINE_MS} ms`);
    }
    await new Promise((r) => setTimeout(r, 50)); // poll interval, not a synchronisation sleep
  }
}

// collect drains a stream of StreamResponse events (each { payload: { $case, value } }).
async function collect(stream) {
  const events = [];
  for await (const ev of stream) events.push(ev);
  return events;
}

// rejectsWith awaits a call that must fail with the SDK's typed error class
// (TaskNotFoundError, …); the SDK builds those from the JSON-RPC error code
// or the REST google.rpc.ErrorInfo reason, so a mismatch there shows here.
async function rejectsWith(promise, ErrorClass, what) {
  await assert.rejects(promise, (err) => {
    let detail = `${err?.name}: ${err?.message}`;
    if (err instanceof A2AError) {
      detail += ` (reason ${err.reason}, jsonrpc code ${err.envelopeCode}, http status ${err.statusCode})`;
    }
    if (err?.cause) detail += ` [cause ${err.cause.name}: ${err.cause.message}]`;
    // A JSON-RPC stream that fails before its first event is answered as
    // an SSE stream whose one event is the error, as the official servers
    // answer it (and as the official Go client needs, which reads only the
    // stream); SDK 1.3.0 raises that as an Error whose cause is its typed
    // error.
    const typed = err instanceof ErrorClass ||
      (!(err instanceof A2AError) && /SSE event contained an error/.test(err?.message ?? '') && err?.cause instanceof ErrorClass);
    assert.ok(typed, `${what}: want the SDK's ${ErrorClass.name}, got ${detail}`);
    return true;
  });
}

const describeEvent = (ev) => {
  const p = ev.payload;
  if (!p) return 'empty';
  switch (p.$case) {
    case 'task':
      return `task(${stateName(p.value.status?.state)})`;
    case 'statusUpdate':
      return `status(${stateName(p.value.status?.state)})`;
    case 'artifactUpdate':
      return `artifact(append=${p.value.append},last=${p.value.lastChunk},${JSON.stringify(partsText(p.value.artifact?.parts))})`;
    default:
      return p.$case;
  }
};
const eventTaskId = (ev) =>
  ev.payload?.$case === 'task' ? ev.payload.value.id : ev.payload?.value?.taskId;

// assertStreamShape checks a stream for one task: it opens with the Task,
// every event belongs to that task, nothing follows a terminal status, and
// it closes with a terminal status update (or a terminal Task).
function assertStreamShape(events, what, wantFinal = TaskState.TASK_STATE_COMPLETED) {
  const seq = events.map(describeEvent).join(' → ');
  assert.ok(events.length > 0, `${what}: empty stream`);
  assert.equal(events[0].payload?.$case, 'task', `${what}: first event is not the Task: ${seq}`);
  const taskId = events[0].payload.value.id;
  assert.ok(taskId, `${what}: first Task event has no id`);
  for (const [i, ev] of events.entries()) {
    assert.equal(eventTaskId(ev), taskId, `${what}: event ${i} (${describeEvent(ev)}) is for task ${eventTaskId(ev)}, want ${taskId}: ${seq}`);
  }
  const firstTerminal = events.findIndex((ev) => {
    const s = ev.payload?.$case === 'task' ? ev.payload.value.status?.state : ev.payload?.$case === 'statusUpdate' ? ev.payload.value.status?.state : undefined;
    return s !== undefined && TERMINAL.has(s);
  });
  assert.notEqual(firstTerminal, -1, `${what}: stream ended without a terminal status: ${seq}`);
  assert.equal(firstTerminal, events.length - 1, `${what}: events after the terminal status: ${seq}`);
  const last = events.at(-1).payload;
  const lastState = last.$case === 'task' ? last.value.status?.state : last.value.status?.state;
  assert.equal(stateName(lastState), stateName(wantFinal), `${what}: stream ends ${stateName(lastState)}, want ${stateName(wantFinal)}: ${seq}`);
  return taskId;
}

// --- the tests ---

describe('agent card (resolved with the SDK card resolver)', () => {
  let card;
  before(async () => {
    card = await resolveCard('echo');
  });

  test('1.0 fields', () => {
    assert.equal(card.name, 'echo');
    assert.ok(card.description, 'card without description');
    assert.ok(card.version, 'card without version');
    assert.equal(card.capabilities?.streaming, true, 'capabilities.streaming');
    assert.ok(Array.isArray(card.defaultInputModes) && card.defaultInputModes.includes('text/plain'), 'defaultInputModes');
    assert.ok(Array.isArray(card.defaultOutputModes) && card.defaultOutputModes.includes('text/plain'), 'defaultOutputModes');
    assert.ok(card.skills?.some((s) => s.id === 'echo'), 'skill "echo" missing');
    const got = (card.supportedInterfaces ?? []).map((i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`).sort();
    const want = [
      `JSONRPC 1.0 ${agentURL('echo')}`,
      `HTTP+JSON 1.0 ${agentURL('echo')}`,
      `JSONRPC 0.3 ${agentURL('echo')}`,
      ...(GRPC ? [`GRPC 1.0 ${GRPC}`] : []),
    ].sort();
    assert.deepEqual(got, want, 'supportedInterfaces');
  });

  test('0.3 fields, as a v0.3-only peer reads them', async () => {
    // The resolver hands back a JSON-shaped card as served, so the 0.3
    // fields a2abus adds next to the 1.0 ones are still on it.
    assert.equal(card.url, agentURL('echo'), '0.3 url');
    assert.equal(card.preferredTransport, 'JSONRPC', '0.3 preferredTransport');
    assert.equal(card.protocolVersion, '0.3.0', '0.3 protocolVersion');
    assert.ok(Array.isArray(card.additionalInterfaces), '0.3 additionalInterfaces');
    for (const i of card.additionalInterfaces) {
      assert.equal(i.url, agentURL('echo'), `0.3 additionalInterfaces url ${JSON.stringify(i)}`);
      assert.equal(i.transport, 'JSONRPC', `0.3 additionalInterfaces: a2abus offers JSON-RPC only in 0.3: ${JSON.stringify(i)}`);
    }
    // A v0.3 card has no supportedInterfaces; the SDK's compat parser must
    // read the rest of a2abus's card as a valid v0.3 card.
    const { supportedInterfaces, ...v03 } = card;
    assert.ok(isLegacyAgentCard(v03), 'SDK does not recognise the 0.3 view as a v0.3 card');
    const parsed = parseLegacyAgentCard(v03);
    assert.equal(parsed.supportedInterfaces[0].url, agentURL('echo'));
    assert.equal(parsed.supportedInterfaces[0].protocolBinding, 'JSONRPC');
    // …and a client built from it talks 0.3 and works end to end.
    const client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
    }).createFromAgentCard(parsed);
    assert.equal(client.protocolVersion, '0.3');
    const text = 'hello from a v0.3 only peer';
    const task = await client.sendMessage(sendRequest(userMessage(text)), opts());
    assertIsTask(task, 'v0.3 peer sendMessage');
    assertState(task, TaskState.TASK_STATE_COMPLETED, 'v0.3 peer sendMessage');
    assert.equal(artifactsText(task), text);
  });

  test('default agent card at the base URL, and ClientFactory.createFromUrl', async () => {
    const root = await resolver.resolve(`${BASE}/`);
    assert.equal(root.name, 'echo', 'the default agent is echo');
    assert.ok(root.supportedInterfaces?.length > 0, 'root card without supportedInterfaces');
    // The SDK's default factory (JSON-RPC + REST) from just a URL.
    const client = await new ClientFactory().createFromUrl(`${agentURL('echo')}/`);
    assert.equal(client.transport.protocolName, 'JSONRPC', 'default factory should pick the first listed interface');
    assert.equal(client.protocolVersion, '1.0');
  });

  test('tck card', async () => {
    const tck = await resolveCard('tck');
    assert.equal(tck.name, 'tck');
    // Its HTTP interfaces at its URL; its gRPC one, at the binding's address,
    // names it by the tenant every call carries.
    const http = tck.supportedInterfaces.filter((i) => i.protocolBinding !== 'GRPC');
    assert.ok(http.every((i) => i.url === agentURL('tck')), JSON.stringify(tck.supportedInterfaces));
    const grpcs = tck.supportedInterfaces.filter((i) => i.protocolBinding === 'GRPC');
    assert.deepEqual(grpcs.map((i) => `${i.url} ${i.tenant}`), GRPC ? [`${GRPC} agents/tck`] : [], JSON.stringify(tck.supportedInterfaces));
  });
});

for (const t of TRANSPORTS) {
  describe(`${t.name}`, () => {
    let echo;
    let tck;
    before(async () => {
      echo = await clientFor(await resolveCard('echo'), t);
      tck = await clientFor(await resolveCard('tck'), t);
    });

    test('blocking sendMessage → COMPLETED task with the echo artifact', async () => {
      const text = `blocking ${t.name} hello from the official js sdk`;
      const msg = userMessage(text);
      const task = await echo.sendMessage(sendRequest(msg), opts());
      assertIsTask(task, 'sendMessage');
      assertState(task, TaskState.TASK_STATE_COMPLETED, 'blocking sendMessage');
      assert.ok(task.contextId, 'task without contextId');
      assert.equal(artifactsText(task), text, `artifacts: ${JSON.stringify(task.artifacts)}`);
    });

    test('non-blocking sendMessage, then getTask until COMPLETED', async () => {
      const text = `non-blocking ${t.name} one two three four five six`;
      const task = await echo.sendMessage(sendRequest(userMessage(text), { returnImmediately: true }), opts());
      assertIsTask(task, 'non-blocking sendMessage');
      const final = await pollTask(echo, task.id, (x) => TERMINAL.has(x.status?.state), 'non-blocking');
      assertState(final, TaskState.TASK_STATE_COMPLETED, 'polled task');
      assert.equal(final.id, task.id);
      assert.equal(final.contextId, task.contextId);
      assert.equal(artifactsText(final), text);
    });

    test('sendMessageStream: Task first, chunks in order, ends COMPLETED', async (ctx) => {
      const text = `streamed ${t.name} alpha beta gamma delta epsilon zeta eta theta`;
      const events = await collect(echo.sendMessageStream(sendRequest(userMessage(text)), opts()));
      const seq = events.map(describeEvent).join(' → ');
      ctx.diagnostic(seq);
      const taskId = assertStreamShape(events, 'stream');
      const chunks = events.filter((e) => e.payload.$case === 'artifactUpdate').map((e) => e.payload.value);
      assert.ok(chunks.length >= 2, `want the echo in several chunks: ${seq}`);
      assert.equal(chunks.map((c) => partsText(c.artifact?.parts)).join(''), text, `chunks out of order or lost: ${seq}`);
      chunks.forEach((c, i) => {
        assert.equal(c.append, i > 0, `chunk ${i} append: ${seq}`);
        assert.equal(c.lastChunk, i === chunks.length - 1, `chunk ${i} lastChunk: ${seq}`);
        assert.equal(c.artifact?.artifactId, chunks[0].artifact?.artifactId, `chunk ${i} artifactId: ${seq}`);
      });
      const lastArtifact = events.findLastIndex((e) => e.payload.$case === 'artifactUpdate');
      assert.ok(lastArtifact < events.length - 1, `artifact after the final status: ${seq}`);
      // The stored task agrees with what was streamed.
      const stored = await echo.getTask(getTaskRequest(taskId), opts());
      assertState(stored, TaskState.TASK_STATE_COMPLETED, 'getTask after stream');
      assert.equal(artifactsText(stored), text);
    });

    test('getTask with historyLength', async () => {
      const msg = userMessage(`history ${t.name}`);
      const task = await echo.sendMessage(sendRequest(msg), opts());
      assertIsTask(task, 'sendMessage');
      const full = await echo.getTask(getTaskRequest(task.id), opts());
      assert.equal(full.id, task.id);
      assert.ok(
        full.history.some((m) => m.messageId === msg.messageId && m.role === Role.ROLE_USER),
        `history lacks the user message ${msg.messageId}: ${JSON.stringify(full.history)}`,
      );
      const one = await echo.getTask(getTaskRequest(task.id, 1), opts());
      assert.equal(one.history.length, 1, `historyLength=1 returned ${one.history.length} messages`);
      assert.deepEqual(one.history[0], full.history.at(-1), 'historyLength=1 must return the most recent message');
    });

    if (t.version === '1.0') {
      // In 1.0, historyLength 0 means "no messages" (a2a.proto GetTaskRequest).
      test('getTask with historyLength 0 returns no history', async () => {
        const task = await echo.sendMessage(sendRequest(userMessage(`history zero ${t.name}`)), opts());
        const none = await echo.getTask(getTaskRequest(task.id, 0), opts());
        assert.equal(none.history.length, 0, `historyLength=0 returned ${none.history.length} messages`);
      });
    }

    test('listTasks', { skip: t.listTasks ? false : 'v0.3 has no tasks/list; the SDK compat transport does not send one' }, async () => {
      const a = await echo.sendMessage(sendRequest(userMessage(`list one ${t.name}`)), opts());
      assertIsTask(a, 'first sendMessage');
      const b = await echo.sendMessage(
        sendRequest(userMessage(`list two ${t.name}`, { contextId: a.contextId })),
        opts(),
      );
      assertIsTask(b, 'second sendMessage');
      assert.equal(b.contextId, a.contextId, 'second task in the same context');
      const res = await echo.listTasks({ ...listRequest(a.contextId), includeArtifacts: true }, opts());
      const ids = res.tasks.map((x) => x.id).sort();
      assert.deepEqual(ids, [a.id, b.id].sort(), `listTasks(contextId) returned ${JSON.stringify(ids)}`);
      for (const x of res.tasks) {
        assertState(x, TaskState.TASK_STATE_COMPLETED, 'listed task');
        assert.equal(x.contextId, a.contextId);
        assert.ok(artifactsText(x), `includeArtifacts=true but task ${x.id} listed without artifacts`);
      }
      assert.equal(res.totalSize, 2, 'totalSize');
      assert.equal(res.nextPageToken, '', 'nextPageToken on the last page');

      // includeArtifacts unset: 1.0 lists tasks without artifacts by default.
      const bare = await echo.listTasks({ ...listRequest(a.contextId), includeArtifacts: undefined }, opts());
      for (const x of bare.tasks) {
        assert.equal(x.artifacts.length, 0, `includeArtifacts unset but task ${x.id} listed with artifacts`);
      }

      // Paging one task at a time visits both tasks once.
      const paged = [];
      let pageToken = '';
      for (let page = 0; page < 5; page++) {
        const r = await echo.listTasks({ ...listRequest(a.contextId), pageSize: 1, pageToken }, opts());
        assert.ok(r.tasks.length <= 1, `pageSize=1 returned ${r.tasks.length} tasks`);
        paged.push(...r.tasks.map((x) => x.id));
        pageToken = r.nextPageToken;
        if (!pageToken) break;
      }
      assert.deepEqual(paged.sort(), [a.id, b.id].sort(), 'tasks seen while paging with pageSize=1');
    });

    test('cancelTask on a running tck task → CANCELED', async () => {
      const task = await tck.sendMessage(sendRequest(userMessage(`cancel me ${t.name}`), { returnImmediately: true }), opts());
      assertIsTask(task, 'non-blocking sendMessage to tck');
      assert.ok(!TERMINAL.has(task.status.state), `tck task already ${stateName(task.status.state)} before cancel`);
      const canceled = await tck.cancelTask(cancelRequest(task.id), opts());
      assert.equal(canceled.id, task.id);
      assertState(canceled, TaskState.TASK_STATE_CANCELED, 'cancelTask result');
      const stored = await tck.getTask(getTaskRequest(task.id), opts());
      assertState(stored, TaskState.TASK_STATE_CANCELED, 'getTask after cancel');
    });

    test('push notification configs: create, get, list, delete; the webhook hears of the cancel', async (ctx) => {
      const card = await resolveCard('tck');
      if (!card.capabilities?.pushNotifications) {
        ctx.skip('the edge under test does not serve push notifications (serve --push true)');
        return;
      }
      const bodies = [];
      let arrived;
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (c) => { body += c; });
        req.on('end', () => {
          bodies.push({ body: JSON.parse(body), token: req.headers['x-a2a-notification-token'] });
          res.writeHead(204).end();
          arrived?.();
        });
      });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${server.address().port}/hook`;
        const task = await tck.sendMessage(sendRequest(userMessage(`push ${t.name}`), { returnImmediately: true }), opts());
        assertIsTask(task, 'non-blocking sendMessage to tck');
        const created = await tck.createTaskPushNotificationConfig({ taskId: task.id, id: 'js', url, token: 'tok-js' }, opts());
        assert.equal(created.taskId, task.id, JSON.stringify(created));
        assert.equal(created.url, url, JSON.stringify(created));
        const got = await tck.getTaskPushNotificationConfig({ taskId: task.id, id: 'js' }, opts());
        assert.equal(got.url, url, JSON.stringify(got));
        const list = await tck.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }, opts());
        assert.deepEqual((list.configs ?? []).map((c) => c.id), ['js'], JSON.stringify(list));
        await tck.cancelTask(cancelRequest(task.id), opts());
        const canceled = () => bodies.some(({ body }) => {
          const state = body.statusUpdate?.status?.state ?? body.status?.state; // 1.0 event, or a 0.3 task
          return (body.statusUpdate?.taskId ?? body.id) === task.id && /cancel/i.test(String(state));
        });
        const deadline = Date.now() + CALL_TIMEOUT_MS;
        while (!canceled()) {
          assert.ok(Date.now() < deadline, `no notification of the cancel: ${JSON.stringify(bodies)}`);
          await new Promise((resolve) => { arrived = resolve; setTimeout(resolve, 1000); });
        }
        assert.ok(bodies.every((b) => b.token === 'tok-js'), JSON.stringify(bodies.map((b) => b.token)));
        await tck.deleteTaskPushNotificationConfig({ taskId: task.id, id: 'js' }, opts());
      } finally {
        server.close();
      }
    });

    test('resubscribeTask on a running task: Task first, ends COMPLETED', async (ctx) => {
      const msg = userMessage(`resubscribe ${t.name}`, { messageId: `test-resubscribe-message-id-${randomUUID()}` });
      const task = await tck.sendMessage(sendRequest(msg, { returnImmediately: true }), opts());
      assertIsTask(task, 'non-blocking sendMessage to tck');
      assert.ok(!TERMINAL.has(task.status.state), `tck task already ${stateName(task.status.state)}`);
      const events = await collect(
        tck.resubscribeTask(subscribeRequest(task.id), { ...opts(), signal: AbortSignal.timeout(TASK_DEADLINE_MS) }),
      );
      ctx.diagnostic(events.map(describeEvent).join(' → '));
      const id = assertStreamShape(events, 'resubscribe');
      assert.equal(id, task.id);
    });

    test('multi-turn: /ask → INPUT_REQUIRED, the answer on the same task → COMPLETED', async () => {
      const asked = await echo.sendMessage(sendRequest(userMessage('/ask')), opts());
      assertIsTask(asked, 'sendMessage /ask');
      assertState(asked, TaskState.TASK_STATE_INPUT_REQUIRED, '/ask');
      assert.ok(partsText(asked.status.message?.parts), 'INPUT_REQUIRED without a question in status.message');
      const answer = `answer ${t.name} to the question`;
      const done = await echo.sendMessage(
        sendRequest(userMessage(answer, { taskId: asked.id, contextId: asked.contextId })),
        opts(),
      );
      assertIsTask(done, 'sendMessage answer');
      assert.equal(done.id, asked.id, 'the answer continues the same task');
      assertState(done, TaskState.TASK_STATE_COMPLETED, 'answer');
      assert.equal(artifactsText(done), answer);
    });

    test('getTask on an unknown id → TaskNotFoundError', async () => {
      await rejectsWith(echo.getTask(getTaskRequest(randomUUID()), opts()), TaskNotFoundError, 'getTask');
    });

    test('sendMessage / sendMessageStream continuing an unknown taskId → TaskNotFoundError', async () => {
      const msg = () => userMessage('to nowhere', { taskId: randomUUID() });
      await rejectsWith(echo.sendMessage(sendRequest(msg()), opts()), TaskNotFoundError, 'sendMessage');
      await rejectsWith(collect(echo.sendMessageStream(sendRequest(msg()), opts())), TaskNotFoundError, 'sendMessageStream');
    });

    test('cancelTask on unknown and on completed tasks → TaskNotFoundError, TaskNotCancelableError', async () => {
      await rejectsWith(echo.cancelTask(cancelRequest(randomUUID()), opts()), TaskNotFoundError, 'cancelTask unknown');
      const task = await echo.sendMessage(sendRequest(userMessage(`cancel too late ${t.name}`)), opts());
      assertState(task, TaskState.TASK_STATE_COMPLETED, 'sendMessage');
      await rejectsWith(echo.cancelTask(cancelRequest(task.id), opts()), TaskNotCancelableError, 'cancelTask completed');
    });

    test('resubscribeTask on unknown and on completed tasks → TaskNotFoundError, UnsupportedOperationError', async () => {
      await rejectsWith(collect(echo.resubscribeTask(subscribeRequest(randomUUID()), opts())), TaskNotFoundError, 'resubscribe unknown');
      const task = await echo.sendMessage(sendRequest(userMessage(`subscribe too late ${t.name}`)), opts());
      assertState(task, TaskState.TASK_STATE_COMPLETED, 'sendMessage');
      await rejectsWith(collect(echo.resubscribeTask(subscribeRequest(task.id), opts())), UnsupportedOperationError, 'resubscribe completed');
    });

    test('sendMessage to a completed task → UnsupportedOperationError', async () => {
      const task = await echo.sendMessage(sendRequest(userMessage(`first ${t.name}`)), opts());
      assertState(task, TaskState.TASK_STATE_COMPLETED, 'sendMessage');
      await rejectsWith(
        echo.sendMessage(sendRequest(userMessage('once more', { taskId: task.id, contextId: task.contextId })), opts()),
        UnsupportedOperationError,
        'sendMessage to a completed task',
      );
    });
  });
}

// With authentication on: the card the SDK resolves declares the scheme,
// a client that presents no credential is refused, and the key in the
// X-API-Key header the card names is accepted as well as the bearer form.
describe('authentication', { skip: !API_KEY && 'the edge under test does not authenticate' }, () => {
  test('card declares the API key scheme; no credential is refused; X-API-Key is accepted', async () => {
    const card = await resolveCard('echo');
    assert.ok(card.securitySchemes?.apiKey, `securitySchemes: ${JSON.stringify(card.securitySchemes)}`);
    assert.ok((card.securityRequirements ?? []).length > 0, 'the card lists its security requirements');
    const plain = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: fetch })] });
    const anonymous = await plain.createFromAgentCard(card);
    await assert.rejects(anonymous.sendMessage({ message: userMessage('who am I?'), configuration: undefined, metadata: undefined, tenant: '' }, { signal: AbortSignal.timeout(CALL_TIMEOUT_MS) }));
    const keyed = new ClientFactory({
      transports: [
        new JsonRpcTransportFactory({
          fetchImpl: (input, init = {}) => {
            const headers = new Headers(init.headers);
            headers.set('X-API-Key', API_KEY);
            return fetch(input, { ...init, headers });
          },
        }),
      ],
    });
    const client = await keyed.createFromAgentCard(card);
    const res = await client.sendMessage({ message: userMessage('with X-API-Key'), configuration: undefined, metadata: undefined, tenant: '' }, opts());
    assert.ok(res, 'an answer');
  });
});
