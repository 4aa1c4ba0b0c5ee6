// Package edge is the HTTP face of a2abus. It serves every agent on the bus
// (under /agents/{name}, the default agent at the root) in every binding and
// dialect: A2A 1.0 JSON-RPC, A2A 1.0 HTTP+JSON, A2A 0.3 JSON-RPC, the older
// tasks/send dialect and its REST routes under /a2a/, with streams as
// Server-Sent Events resumable on any edge by Last-Event-ID. It also serves
// agent cards, the live agent list (GET /a2a/agents), /healthz, /readyz
// (following the bus), /metrics, admission by per-agent backlog, and the
// sweeps that enforce retention and requeue orphaned work. Starting answers
// for a process whose edge is not ready yet. Listen serves any HTTP
// listener of the process within its bounds: request deadlines, head size,
// open connections in all and per source address, a shutdown that nothing
// holds past its grace.
//
// The edge is stateless: every call becomes reads and compare-and-swap
// writes of task records and events on the bus, so any replica serves any
// task. There is one front door: every binding decodes its request into
// the one internal call (agent, method, params, principal, version), which
// passes the one pipeline of checks (body limits, content type, version,
// agent resolution; authentication, authorization and rate limits go there
// and nowhere else), and is adapted by its dialect into one operation of
// the typed A2A service (service.go), reached only through its interceptor
// chain (intercept.go) and the only holder of the bus task lifecycle; the
// answer is encoded back by the dialect, streams through the one SSE
// framer.
// A client's message, whatever its dialect, is checked once against the
// part rules and bounds of Config (input.go, schemas.CheckInput).
// Protocol errors come from the one table in schemas and reach the wire
// through its codec (schemas/wire.go). See ARCHITECTURE.md, "The edge".
//
// Dependency rule: edge depends on schemas, bus (in the roles of roles.go)
// and edge/auth only; it never imports workers, discovery or NATS.
package edge
