// Package discovery is the A2A client side of a2abus, used by the client
// commands, the load tool and (through cmd) the remote agent kind. It owns:
//
//   - agent cards: fetching from the well-known paths (Fetcher), reading
//     the 1.0 and 0.3 shapes and those of the older tasks/send dialect and
//     validating them (ParseCard), checking their signatures with the
//     operator's trusted keys (Fetcher.Verify, a CardVerifier cmd fills
//     with edge/auth's), and choosing the interface to speak (Endpoints,
//     ClientFor);
//   - the card cache policy (Resolver): freshness from HTTP caching
//     headers, ETag revalidation, stale-if-error up to a hard TTL, over the
//     A2A_CARDS bucket shared by every process (the store itself is bus's),
//     with, for a card that declares no skills, the agent's answer to
//     Aleph's GET {endpoint}/capabilities (Fetcher.Capabilities,
//     WithCapabilities);
//   - the A2A client (Client): A2A 1.0 JSON-RPC, 1.0 HTTP+JSON, 1.0 gRPC
//     and 0.3 JSON-RPC, and the older tasks/send dialect of OpenFang and
//     AgentOS (JSON-RPC, or OpenFang's REST routes), each wire form an
//     adapter of its own file behind the one interface Client declares
//     (wire.go), with agents' errors decoded back to the table in schemas;
//     a gRPC endpoint's Client holds a connection of its own, which Close
//     releases;
//   - streams of task events over Server-Sent Events or gRPC (Stream), or
//     made by polling an agent of the older dialect that cannot stream;
//   - the SSRF guard (Policy) every outbound request passes, on the URL,
//     every redirect and the address dialled; a redirect to another
//     origin carries none of the credentials or configured headers;
//   - outbound authentication: what a card declares (CardSecurity: its
//     securitySchemes and requirements, 1.0 or 0.3 shape) and the
//     Credentials a client applies to every request, chosen by it
//     (Authenticator: a bearer token, an API key where the card says, or
//     OAuth2 client credentials through golang.org/x/oauth2, the token
//     cached until shortly before it expires and replaced when an agent
//     refuses it).
//
// An agent's refusal, HTTP 401 or 403 or JSON-RPC -31401 or -31403, comes
// back as an *AuthError (with the WWW-Authenticate challenge and the
// card's schemes) matching schemas.ErrUnauthenticated or
// schemas.ErrPermissionDenied; credentials that match none of the card's
// schemes give a *MismatchError (ErrNoMatchingCredentials) and a
// credential that cannot be had one wrapping ErrCredentialUnavailable,
// both before anything is sent. Secrets never appear in errors.
//
// Protocol errors an agent answers come back as *schemas.Error occurrences
// of the one error table (errors.Is works against its rows), so a caller
// handles a remote TaskNotFound exactly like a local one. Failures to reach
// the agent, or answers that are not A2A, are plain errors naming the URL;
// IsRetryable tells the transient ones.
//
// See ARCHITECTURE.md, "Client and gateway side".
//
//   - receiving push notifications (Receiver, NotificationVerifier): the
//     signature of each checked against the sender's JWKS, repeats of an
//     event dropped.
//
// Dependency rule: discovery depends on schemas, on bus only for the
// card cache store and the metrics registry, on edge/auth only for
// verifying signed notifications against a JWKS, and on
// edge/grpcbinding/a2apb and edge/grpcbinding/pbwire (the lf.a2a.v1
// messages and their conversions, shared with the edge's gRPC binding)
// only for its gRPC wire; it never imports the edge's server, workers or
// NATS. It is the one package that imports golang.org/x/oauth2, and the
// one outside edge/grpcbinding that imports gRPC.
// It reads no environment or files: secrets come in as SecretFunc.
package discovery
