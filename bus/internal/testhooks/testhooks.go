// Package testhooks carries package bus's test-only operations to
// bus/bustest, and to nothing else: the go command lets only packages under
// bus/ import it, and no product package may import bustest (the
// dependency test in cmd/a2abus holds them to that). So *bus.Bus exports
// only what the product calls, and tests can still inject the faults a
// crash or a race leaves behind and look at what the bus keeps to itself.
package testhooks

// Ops is set by package bus, in its init, to a value of its own unexported
// type whose methods are those operations, each taking first the *bus.Bus
// it acts on. This package cannot name bus's types (bus imports it), so
// bus/bustest, which can, declares the interface of the methods it calls
// and asserts Ops to it once.
var Ops any
