package pbwire

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The schemas' types are A2A 1.0's JSON form, which the specification
// defines as the protobuf messages' canonical JSON mapping: a message
// converts through that JSON, so the two can never disagree about a field,
// an enum name or a oneof. The messages of the busy path are also copied
// field by field (direct.go), which the JSON path checks.
//
// The errors are plain: what a failed conversion means depends on the end
// and the direction (on the server, a request that does not read is the
// client's error and an answer that does not convert the edge's; on the
// client, an answer that does not read is the agent's), so each caller
// classifies it.

// fromJSON ignores what a2abus adds to a value beyond the specification
// (its a2abus* members): a protobuf message has no field for them.
var fromJSON = protojson.UnmarshalOptions{DiscardUnknown: true}

// FromPB reads the message m into v, a pointer to a value of the schemas'
// types.
func FromPB(m proto.Message, v any) error {
	if fromPBDirect(m, v) {
		return nil
	}
	return fromPBViaJSON(m, v)
}

// fromPBViaJSON is FromPB's definition: m's canonical JSON read into v.
func fromPBViaJSON(m proto.Message, v any) error {
	b, err := protojson.Marshal(m)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	return err
}

// ToPB writes v, a value of the schemas' types, into the message m; what
// the message has no field for is left out.
func ToPB(v any, m proto.Message) error {
	if toPBDirect(v, m) {
		return nil
	}
	return toPBViaJSON(v, m)
}

// toPBViaJSON is ToPB's definition: v's JSON read as m's canonical JSON.
func toPBViaJSON(v any, m proto.Message) error {
	b, err := json.Marshal(v)
	if err == nil {
		err = fromJSON.Unmarshal(b, m)
	}
	return err
}
