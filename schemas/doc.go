// Package schemas is the vocabulary of a2abus: the A2A 1.0 wire types, the
// task state machine, the rules a client's message parts and ids must meet
// (parts.go, ids.go), the one table of protocol errors, the names of every
// stream, bucket, consumer, subject and CloudEvent type, and the data shapes
// of bus messages (with JSON Schemas in jsonschema/ for workers written in
// other languages).
//
// schemas depends on the standard library and uuid only.
package schemas
