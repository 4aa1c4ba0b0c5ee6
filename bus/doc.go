// Package bus is the only package of a2abus that speaks NATS, JetStream and
// CloudEvents. It owns the embedded server, the connection (reconnect,
// drain), idempotent provisioning of streams, consumers and buckets, the
// CloudEvents-on-NATS codec, the task store on KV (create, get, CAS update,
// list), work publishing and consumption, task events, the task watcher the
// edge waits on, and the live agent registry.
//
// bus depends on schemas, nats.go, nats-server and sdk-go; nothing here knows
// HTTP or agents.
package bus
