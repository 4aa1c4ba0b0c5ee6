// Package pbwire is A2A's gRPC wire form as a2abus reads and writes it,
// shared by both ends: the gRPC binding's server (edge/grpcbinding) and the
// A2A client's gRPC wire (discovery). It owns two conversions, each both
// ways, so the server and the client cannot disagree on either:
//
//   - messages: the schemas' types to the generated lf.a2a.v1 messages
//     (a2apb) and back, defined by protobuf's canonical JSON mapping,
//     which is A2A's JSON form (convert.go), and copied field by field on
//     the busy path where that copy is exact (direct.go);
//   - errors: an occurrence of the error table (*schemas.Error) to a
//     google.rpc.Status with ErrorInfo and RetryInfo, and a status back to
//     the table row (status.go), through the one codec of schemas/wire.go.
//
// Dependency rule: pbwire depends on schemas and on the protobuf, gRPC
// status and google.rpc details libraries only; it knows nothing of the
// edge, the bus or the client. Protobuf types stay out of schemas and the
// bus: this package is where they meet the schemas' types.
package pbwire
