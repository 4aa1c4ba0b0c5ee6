// Package workers is the agent runtime of a2abus: the Agent interface agent
// authors implement, the Runner that takes work for an agent from the bus and
// runs it (compare-and-swap of the task, one event per change, heartbeats,
// cancellation, ack when done), and the built-in agent kinds (echo, exec,
// tck).
//
// workers depends on schemas and bus only; it never imports edge or
// discovery.
package workers
