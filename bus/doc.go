// Package bus is the only package of a2abus that speaks NATS, JetStream and
// CloudEvents; everything else reaches the bus through it. It owns:
//
//   - the embedded NATS server (StartServer), the connection (reconnect,
//     drain) and idempotent provisioning of every stream, consumer and
//     bucket the bus contract names;
//   - who may use the bus (auth.go): the server's NATS users and their
//     roles (admin, edge, edge-admin, worker) as subject permissions,
//     route credentials between cluster members, TLS, and the credentials
//     a connection presents; the server's refusals of a connection's
//     publishes, handed to the operation refused (refusals.go);
//   - the CloudEvents-on-NATS codec: binary mode written, structured mode
//     and JSON batches read, the event id as Nats-Msg-Id;
//   - the task store on KV: create once, compare-and-swap updates that fold
//     events (Apply, ApplyEventsSince; FoldWrite is the fold) and publish
//     them after storing, TTL on the terminal write, list, and reads that
//     decide confirmed with the stream leader (GetTaskAtLeast, and a
//     leader read after a lost CAS);
//   - the task lifecycle (lifecycle.go): the one place where a task is
//     submitted (created, its work queued in the intake on its caller's
//     subject under a deterministic id, withdrawn when the bus refuses the
//     work), continued,
//     canceled, read on behalf of its owner (checked before anything is
//     read) and followed to its end; the edge and the fan-out agent use it
//     rather than composing those steps themselves;
//   - retries that ride out a leader election (one loop, retry.go);
//   - fair dispatch (dispatch.go): the holder of the dispatch lease moves
//     queued work from the intake to an agent's work subject as its
//     workers ask for it, taking callers in turn;
//   - work delivery (WorkConsumer, Work: ack, nak with back-off, in-progress,
//     term), cancel notices, the dead-letter stream and max-delivery
//     advisories (dlq.go);
//   - following: one follower per stream of interest that replaces a lost
//     consumer within seconds (follow.go), behind the TaskWatcher that
//     blocking requests wait on, the AgentDirectory, and the event hub
//     that serves every per-task event reader of a process with resumable
//     cursors (ReadEvents) from one consumer;
//   - the task index (index.go): kept from the headers of the task
//     writes, it pages ListTasks, counts each caller's unfinished tasks,
//     and drives the sweep (one process at a time, by lease): retention
//     of finished tasks, requeueing of orphaned work, cancellation of
//     tasks idle for input;
//   - whether the bus takes writes (health.go): a WriteProbe asks the
//     leaders of the streams an edge writes every second, for readiness;
//   - the live agent registry, the external card cache store, and the
//     process's metrics registry (metrics.go, on the Prometheus client,
//     which only bus imports) with the agents' backlog gauges read at
//     scrape time (backlog.go).
//
// Bus exports only what the product calls. What only tests may do — the
// faults a crash or a race leaves behind (a task stored without its work,
// extra copies of work, a record changed behind its writers, a dropped
// connection) and a look at what the bus keeps to itself (dead letters,
// stored events, consumer and message counts) — is in unexported methods,
// which testhooks.go hands to bus/bustest through bus/internal/testhooks;
// Go's internal rule keeps that package to bus and bustest.
//
// Nothing here knows HTTP (but the metrics registry's handler) or what an
// agent does. See ARCHITECTURE.md for
// the bus contract and the task lifecycle; schemas/jsonschema/README.md
// has the contract for workers in other languages.
//
// Dependency rule: bus depends on schemas, bus/internal/testhooks, nats.go,
// nats-server, sdk-go, go-json-experiment/json and the Prometheus client
// (client_golang, client_model, common) only; no other package
// of a2abus may import NATS or CloudEvents libraries. bus/bustest (in-process JetStream and bus's
// test-only operations) is for tests only.
package bus
