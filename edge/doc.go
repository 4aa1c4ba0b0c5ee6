// Package edge is the HTTP face of a2abus: A2A over JSON-RPC 2.0 (1.0),
// agent cards, the agent list, health and readiness. It is stateless: every
// call becomes reads and compare-and-swap writes of task records and events
// on the bus, so any edge replica serves any task. Protocol errors come from
// the one table in schemas and are translated to wire codes here.
//
// edge depends on schemas and bus only; it never imports workers or
// discovery.
package edge
