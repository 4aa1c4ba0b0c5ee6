package grpcbinding

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/a2abus/a2abus/schemas"
)

// The schemas' types are A2A 1.0's JSON form, which the specification
// defines as the protobuf messages' canonical JSON mapping: a message
// converts through that JSON, so the two can never disagree about a field,
// an enum name or a oneof. (A hand-written field-by-field copy would be
// faster; the conversion is measured with the binding in issue 35's work.)

// jsonToPB ignores what a2abus adds to an answer beyond the specification
// (its a2abus* members): a gRPC client has no field for them.
var jsonToPB = protojson.UnmarshalOptions{DiscardUnknown: true}

// fromPB reads a request message into the schemas' type v; a message that
// does not read is the client's error.
func fromPB(m proto.Message, v any) error {
	b, err := protojson.Marshal(m)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return statusOf(schemas.Errorf(schemas.ErrInvalidParams, "the request does not read as A2A: %v", err))
	}
	return nil
}

// toPB writes the schemas' value v into the answer message m.
func toPB(v any, m proto.Message) error {
	b, err := json.Marshal(v)
	if err == nil {
		err = jsonToPB.Unmarshal(b, m)
	}
	if err != nil {
		return statusOf(schemas.Errorf(schemas.ErrInternal, "the answer does not convert to protobuf: %v", err))
	}
	return nil
}
