// The JavaScript baseline for a2abus's load comparisons (edge/interop/compare.sh):
// the official A2A JS SDK server (@a2a-js/sdk, pinned in package.json) on
// express, with the SDK's in-memory task store and default request handler,
// serving an echo agent that does the same work per message as a2agoecho
// (../cmd/a2agoecho) and a2abus's demo echo agent for a short message: a
// stored task (SUBMITTED), WORKING, one text artifact "echo-<task id>"
// holding the user's text, and COMPLETED with a status message.
//
// This file owns only the agent and the wiring; routing, the task store,
// the event buses and the wire formats are the SDK's, which is the point of
// a baseline. It serves the card at /.well-known/agent-card.json, JSON-RPC
// 1.0 at the base URL and HTTP+JSON 1.0 under /rest.
//
//	node echo-server.mjs --listen 127.0.0.1:9735        (or ECHO_LISTEN=...)
//	a2abus load --url http://127.0.0.1:9735 --clients 64
//
// --delay-ms N waits N ms before the artifact (a stand-in for a model call,
// like the a2abus echo agent's Delay), which also leaves time to cancel.
import http from 'node:http';
import { parseArgs } from 'node:util';
import express from 'express';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const { values: opts } = parseArgs({
	options: {
		listen: { type: 'string', default: process.env.ECHO_LISTEN || '127.0.0.1:9735' },
		'delay-ms': { type: 'string', default: process.env.ECHO_DELAY_MS || '0' },
	},
});
const delayMs = Number(opts['delay-ms']);
if (!Number.isFinite(delayMs) || delayMs < 0) {
	throw new Error(`--delay-ms must be a number >= 0, got ${opts['delay-ms']}`);
}

const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });

// EchoExecutor answers every message with its own text as one artifact. It
// keeps the tasks it is running (id -> context id and a cancel hook) so
// cancelTask can end one with CANCELED; a finished task is terminal, and
// the SDK refuses to cancel it before asking the executor.
class EchoExecutor {
	#running = new Map();

	async execute(ctx, bus) {
		const { taskId, contextId, userMessage } = ctx;
		const text = userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
		const run = { contextId, canceled: false, wake: () => {} };
		this.#running.set(taskId, run);
		try {
			// The SDK wants a task (or a message) first on every call, a
			// follow-up on a stored task included.
			bus.publish(AgentEvent.task(ctx.task ?? {
				id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED, undefined),
				artifacts: [], history: [userMessage], metadata: undefined,
			}));
			bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING, undefined), metadata: undefined }));
			if (delayMs > 0) {
				await new Promise((resolve) => {
					const t = setTimeout(resolve, delayMs);
					run.wake = () => { clearTimeout(t); resolve(); };
				});
			}
			if (run.canceled) return;
			bus.publish(AgentEvent.artifactUpdate({
				taskId, contextId, append: false, lastChunk: true, metadata: undefined,
				artifact: { artifactId: `echo-${taskId}`, name: 'echo', description: '', parts: [textPart(text)], metadata: undefined, extensions: [] },
			}));
			const done = {
				messageId: crypto.randomUUID(), taskId, contextId, role: Role.ROLE_AGENT,
				parts: [textPart(`echoed ${Buffer.byteLength(text)} characters in 1 chunk(s)`)],
				metadata: undefined, extensions: [], referenceTaskIds: [],
			};
			bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED, done), metadata: undefined }));
		} finally {
			this.#running.delete(taskId);
		}
	}

	async cancelTask(taskId, bus) {
		const run = this.#running.get(taskId);
		if (!run || run.canceled) return;
		run.canceled = true;
		run.wake();
		bus.publish(AgentEvent.statusUpdate({ taskId, contextId: run.contextId, status: status(TaskState.TASK_STATE_CANCELED, undefined), metadata: undefined }));
	}
}

function agentCard(baseURL) {
	const iface = (url, protocolBinding) => ({ url, protocolBinding, tenant: '', protocolVersion: '1.0' });
	return {
		name: 'a2ajsecho',
		description: '@a2a-js/sdk baseline echo agent',
		version: '1.0.0',
		supportedInterfaces: [iface(baseURL, 'JSONRPC'), iface(`${baseURL}/rest`, 'HTTP+JSON')],
		provider: undefined,
		capabilities: { streaming: true, pushNotifications: false, extensions: [] },
		securitySchemes: {},
		securityRequirements: [],
		defaultInputModes: ['text/plain'],
		defaultOutputModes: ['text/plain'],
		skills: [{
			id: 'echo', name: 'Echo', description: 'Returns the text it is sent.', tags: ['echo'], examples: [],
			inputModes: [], outputModes: [], securityRequirements: [],
		}],
		signatures: [],
	};
}

// Listen first, then build the card from the bound address, so
// "--listen 127.0.0.1:0" serves a card with the port actually taken.
const sep = opts.listen.lastIndexOf(':');
if (sep < 0) throw new Error(`--listen wants host:port, got ${opts.listen}`);
const server = http.createServer();
await new Promise((resolve, reject) => {
	server.once('error', reject);
	server.listen(Number(opts.listen.slice(sep + 1)), opts.listen.slice(0, sep).replace(/^\[|\]$/g, ''), resolve);
});
const addr = server.address();
const base = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;

const requestHandler = new DefaultRequestHandler(agentCard(base), new InMemoryTaskStore(), new EchoExecutor());
const app = express();
app.disable('x-powered-by');
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: requestHandler }));
app.use('/rest', restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.use('/', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
server.on('request', app);
console.log(`a2ajsecho listening on ${base}`);

const stop = () => {
	server.close(() => process.exit(0));
	server.closeAllConnections();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
