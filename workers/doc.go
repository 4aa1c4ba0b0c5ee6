// Package workers is the agent runtime of a2abus: the Agent interface agent
// authors implement, the Emitter through which an agent reports (each call
// one compare-and-swap of the task, then its events published), the Runner
// that takes an agent's work from its shared durable consumer and runs it:
// reads the task (from the stream leader when a replica lags), heartbeats,
// cancellation, ack when done, nak with back-off on bus trouble, dead
// letters for poison work and for work whose deliveries ran out, and
// registration in the live agent registry. A Recorder runs agents the
// same way on tasks kept in memory, for their unit tests (no NATS); an
// agent that delegates to others reaches them through its Request's
// Delegation, never a bus of its own.
//
// Built-in agent kinds: echo (the demo), exec (a command per task), tck
// (the conformance agent), remote (a local name proxied to an external A2A
// agent through a RemoteClient that cmd adapts from discovery), fanout
// (child tasks on several agents, answers merged into the parent), router
// (a child task on the live agent with the skill asked for), llm (an
// OpenAI-compatible chat endpoint), langgraph (a LangGraph Platform
// assistant) and mcp (an MCP server's tools, through a ToolClient). See
// ARCHITECTURE.md, "Workers" and "Client and gateway side".
//
// Dependency rule: workers depends on schemas and bus only; it never
// imports edge, discovery or NATS.
package workers
