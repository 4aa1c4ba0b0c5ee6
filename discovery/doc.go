// Package discovery is the A2A client side of a2abus, used by the client
// commands, the load tool and (through cmd) the remote agent kind. It owns:
//
//   - agent cards: fetching from the well-known paths (Fetcher), reading
//     the 1.0 and 0.3 shapes and those of the older tasks/send dialect and
//     validating them (ParseCard), and choosing the interface to speak
//     (Endpoints, ClientFor);
//   - the card cache policy (Resolver): freshness from HTTP caching
//     headers, ETag revalidation, stale-if-error up to a hard TTL, over the
//     A2A_CARDS bucket shared by every process (the store itself is bus's);
//   - the A2A client (Client): A2A 1.0 JSON-RPC, 1.0 HTTP+JSON and 0.3
//     JSON-RPC, and the older tasks/send dialect of OpenFang and AgentOS
//     (JSON-RPC, or OpenFang's REST routes), with agents' errors decoded
//     back to the table in schemas;
//   - streams of task events over Server-Sent Events (Stream), or made by
//     polling an agent of the older dialect that cannot stream;
//   - the SSRF guard (Policy) every outbound request passes, on the URL,
//     every redirect and the address dialled.
//
// Protocol errors an agent answers come back as *schemas.Error occurrences
// of the one error table (errors.Is works against its rows), so a caller
// handles a remote TaskNotFound exactly like a local one. Failures to reach
// the agent, or answers that are not A2A, are plain errors naming the URL;
// IsRetryable tells the transient ones.
//
// See ARCHITECTURE.md, "Client and gateway side".
//
// Dependency rule: discovery depends on schemas, and on bus only for the
// card cache store and the metrics registry; it never imports edge,
// workers or NATS.
package discovery
