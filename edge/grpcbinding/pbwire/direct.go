package pbwire

import (
	"bytes"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
)

// Direct conversions of the messages nearly every call carries — a send
// and its answer, a task, a stream's events — field by field instead of
// through canonical JSON, which costs a protojson encode or decode and an
// encoding/json one per message (about half the binding's own CPU per
// blocking send). Each gives up on anything it would not copy exactly as
// the JSON path does (a value the enum does not name, two contents in one
// part, metadata that is not JSON, a push config in a send), and the
// caller then converts through JSON, which stays the definition:
// TestDirectConversionsMatchJSON holds the two equal on every message
// shape they cover.

// toPBDirect writes v into m directly when both are types it covers;
// done false means m was not touched.
func toPBDirect(v any, m proto.Message) (done bool) {
	var c conv
	switch v := v.(type) {
	case *schemas.Task:
		if out, ok := m.(*a2apb.Task); ok && v != nil {
			c.taskInto(v, out)
			if c.bad {
				proto.Reset(out)
			}
			return !c.bad
		}
	case *schemas.SendMessageResponse:
		if out, ok := m.(*a2apb.SendMessageResponse); ok && v != nil {
			switch {
			case v.Task != nil && v.Message == nil:
				out.Payload = &a2apb.SendMessageResponse_Task{Task: c.task(v.Task)}
			case v.Message != nil && v.Task == nil:
				out.Payload = &a2apb.SendMessageResponse_Message{Message: c.message(v.Message)}
			default:
				return false
			}
			if c.bad {
				out.Payload = nil
			}
			return !c.bad
		}
	case *schemas.StreamResponse:
		if out, ok := m.(*a2apb.StreamResponse); ok && v != nil {
			c.streamInto(v, out)
			if c.bad {
				out.Payload = nil
			}
			return !c.bad
		}
	case *schemas.SendMessageRequest:
		if out, ok := m.(*a2apb.SendMessageRequest); ok && v != nil {
			c.sendRequestInto(v, out)
			if c.bad {
				proto.Reset(out)
			}
			return !c.bad
		}
	}
	return false
}

// fromPBDirect reads m into v directly when both are types it covers;
// done false means v was not touched.
func fromPBDirect(m proto.Message, v any) (done bool) {
	var c conv
	switch m := m.(type) {
	case *a2apb.SendMessageRequest:
		if out, ok := v.(*schemas.SendMessageRequest); ok {
			r := c.fromSendRequest(m)
			if !c.bad {
				*out = r
			}
			return !c.bad
		}
	case *a2apb.SendMessageResponse:
		if out, ok := v.(*schemas.SendMessageResponse); ok {
			var r schemas.SendMessageResponse
			switch p := m.GetPayload().(type) {
			case *a2apb.SendMessageResponse_Task:
				r.Task = c.fromTask(p.Task)
			case *a2apb.SendMessageResponse_Message:
				r.Message = c.fromMessage(p.Message)
			default:
				return false
			}
			if !c.bad {
				*out = r
			}
			return !c.bad
		}
	case *a2apb.StreamResponse:
		if out, ok := v.(*schemas.StreamResponse); ok {
			var r schemas.StreamResponse
			switch p := m.GetPayload().(type) {
			case *a2apb.StreamResponse_Task:
				r.Task = c.fromTask(p.Task)
			case *a2apb.StreamResponse_Message:
				r.Message = c.fromMessage(p.Message)
			case *a2apb.StreamResponse_StatusUpdate:
				r.StatusUpdate = c.fromStatusEvent(p.StatusUpdate)
			case *a2apb.StreamResponse_ArtifactUpdate:
				r.ArtifactUpdate = c.fromArtifactEvent(p.ArtifactUpdate)
			default:
				return false
			}
			if !c.bad {
				*out = r
			}
			return !c.bad
		}
	case *a2apb.Task:
		if out, ok := v.(*schemas.Task); ok {
			t := c.fromTask(m)
			if !c.bad {
				*out = *t
			}
			return !c.bad
		}
	}
	return false
}

// conv is one direct conversion; bad is set at the first thing it does
// not copy exactly as the JSON path would.
type conv struct{ bad bool }

// ---- schemas → protobuf

func (c *conv) sendRequestInto(r *schemas.SendMessageRequest, out *a2apb.SendMessageRequest) {
	out.Tenant, out.Metadata = r.Tenant, c.structOf(r.Metadata)
	if r.Message != nil {
		out.Message = c.message(r.Message)
	}
	if cfg := r.Configuration; cfg != nil {
		if cfg.TaskPushNotificationConfig != nil {
			c.bad = true // rare on the busy path: through JSON
			return
		}
		out.Configuration = &a2apb.SendMessageConfiguration{AcceptedOutputModes: nonEmpty(cfg.AcceptedOutputModes),
			HistoryLength: cfg.HistoryLength, ReturnImmediately: cfg.ReturnImmediately}
		if g := cfg.IfGenerationMatch; g != nil {
			n := int64(*g)
			out.Configuration.IfGenerationMatch = &n
		}
	}
}

func (c *conv) streamInto(r *schemas.StreamResponse, out *a2apb.StreamResponse) {
	n := 0
	if r.Task != nil {
		n, out.Payload = n+1, &a2apb.StreamResponse_Task{Task: c.task(r.Task)}
	}
	if r.Message != nil {
		n, out.Payload = n+1, &a2apb.StreamResponse_Message{Message: c.message(r.Message)}
	}
	if e := r.StatusUpdate; e != nil {
		n, out.Payload = n+1, &a2apb.StreamResponse_StatusUpdate{StatusUpdate: &a2apb.TaskStatusUpdateEvent{TaskId: e.TaskID, ContextId: e.ContextID,
			Status: c.status(&e.Status), Metadata: c.structOf(e.Metadata), Generation: int64(e.Generation)}}
	}
	if e := r.ArtifactUpdate; e != nil {
		n, out.Payload = n+1, &a2apb.StreamResponse_ArtifactUpdate{ArtifactUpdate: &a2apb.TaskArtifactUpdateEvent{TaskId: e.TaskID, ContextId: e.ContextID,
			Artifact: c.artifact(&e.Artifact), Append: e.Append, LastChunk: e.LastChunk, Metadata: c.structOf(e.Metadata), Generation: int64(e.Generation)}}
	}
	if n != 1 {
		c.bad = true
	}
}

func (c *conv) task(t *schemas.Task) *a2apb.Task {
	out := new(a2apb.Task)
	c.taskInto(t, out)
	return out
}

func (c *conv) taskInto(t *schemas.Task, out *a2apb.Task) {
	out.Id, out.ContextId, out.Status, out.Metadata, out.Generation = t.ID, t.ContextID, c.status(&t.Status), c.structOf(t.Metadata), int64(t.Generation)
	if len(t.Artifacts) > 0 {
		out.Artifacts = make([]*a2apb.Artifact, len(t.Artifacts))
		for i := range t.Artifacts {
			out.Artifacts[i] = c.artifact(&t.Artifacts[i])
		}
	}
	if len(t.History) > 0 {
		out.History = make([]*a2apb.Message, len(t.History))
		for i := range t.History {
			out.History[i] = c.message(&t.History[i])
		}
	}
}

func (c *conv) status(s *schemas.TaskStatus) *a2apb.TaskStatus {
	state, ok := a2apb.TaskState_value[string(s.State)]
	if !ok {
		c.bad = true
	}
	out := &a2apb.TaskStatus{State: a2apb.TaskState(state)}
	if s.Message != nil {
		out.Message = c.message(s.Message)
	}
	if s.Timestamp != nil {
		// As the JSON form writes it: UTC, to the millisecond.
		out.Timestamp = timestamppb.New(s.Timestamp.UTC().Truncate(time.Millisecond))
	}
	return out
}

func (c *conv) artifact(a *schemas.Artifact) *a2apb.Artifact {
	return &a2apb.Artifact{ArtifactId: a.ArtifactID, Name: a.Name, Description: a.Description, Parts: c.parts(a.Parts),
		Metadata: c.structOf(a.Metadata), Extensions: nonEmpty(a.Extensions)}
}

func (c *conv) message(m *schemas.Message) *a2apb.Message {
	role, ok := a2apb.Role_value[string(m.Role)]
	if !ok {
		c.bad = true
	}
	return &a2apb.Message{MessageId: m.MessageID, ContextId: m.ContextID, TaskId: m.TaskID, Role: a2apb.Role(role),
		Parts: c.parts(m.Parts), Metadata: c.structOf(m.Metadata), Extensions: nonEmpty(m.Extensions), ReferenceTaskIds: nonEmpty(m.ReferenceTaskIDs)}
}

func (c *conv) parts(ps []schemas.Part) []*a2apb.Part {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*a2apb.Part, len(ps))
	for i := range ps {
		p := &ps[i]
		pb := &a2apb.Part{Metadata: c.structOf(p.Metadata), Filename: p.Filename, MediaType: p.MediaType}
		n := 0
		if p.Text != nil {
			n, pb.Content = n+1, &a2apb.Part_Text{Text: *p.Text}
		}
		if p.Raw != nil {
			if len(p.Raw) == 0 {
				c.bad = true // an empty raw: as JSON writes it, not worth a case here
			}
			n, pb.Content = n+1, &a2apb.Part_Raw{Raw: p.Raw}
		}
		if p.URL != nil {
			n, pb.Content = n+1, &a2apb.Part_Url{Url: *p.URL}
		}
		if len(p.Data) > 0 {
			v := new(structpb.Value)
			if err := protojson.Unmarshal(p.Data, v); err != nil {
				c.bad = true
			}
			n, pb.Content = n+1, &a2apb.Part_Data{Data: v}
		}
		if n > 1 {
			c.bad = true // two contents: the JSON path says what is wrong
		}
		out[i] = pb
	}
	return out
}

// structOf is a metadata map as a Struct (nil for none, as the JSON form
// leaves an empty one out); a value that is not JSON's gives up.
func (c *conv) structOf(m map[string]any) *structpb.Struct {
	if len(m) == 0 {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		c.bad = true
	}
	return s
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// ---- protobuf → schemas

func (c *conv) fromSendRequest(r *a2apb.SendMessageRequest) schemas.SendMessageRequest {
	out := schemas.SendMessageRequest{Tenant: r.GetTenant(), Metadata: c.mapOf(r.GetMetadata())}
	if r.Message != nil {
		out.Message = c.fromMessage(r.Message)
	}
	if cfg := r.Configuration; cfg != nil {
		if cfg.TaskPushNotificationConfig != nil {
			c.bad = true
			return out
		}
		out.Configuration = &schemas.SendMessageConfiguration{AcceptedOutputModes: nonEmpty(cfg.AcceptedOutputModes),
			HistoryLength: cfg.HistoryLength, ReturnImmediately: cfg.ReturnImmediately}
		if g := cfg.IfGenerationMatch; g != nil {
			if *g < 0 {
				c.bad = true // the JSON path refuses it, saying why
			}
			n := schemas.Generation(*g)
			out.Configuration.IfGenerationMatch = &n
		}
	}
	return out
}

func (c *conv) fromTask(t *a2apb.Task) *schemas.Task {
	if t == nil {
		c.bad = true
		return nil
	}
	out := &schemas.Task{ID: t.Id, ContextID: t.ContextId, Metadata: c.mapOf(t.Metadata), Generation: schemas.Generation(t.Generation)}
	if t.Generation < 0 {
		c.bad = true
	}
	if t.Status != nil {
		out.Status = c.fromStatus(t.Status)
	}
	if len(t.Artifacts) > 0 {
		out.Artifacts = make([]schemas.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			out.Artifacts[i] = c.fromArtifact(a)
		}
	}
	if len(t.History) > 0 {
		out.History = make([]schemas.Message, len(t.History))
		for i, m := range t.History {
			out.History[i] = *c.fromMessage(m)
		}
	}
	return out
}

func (c *conv) fromStatus(s *a2apb.TaskStatus) schemas.TaskStatus {
	out := schemas.TaskStatus{State: schemas.TaskState(c.enumName(a2apb.TaskState_name, int32(s.State)))}
	if s.Message != nil {
		out.Message = c.fromMessage(s.Message)
	}
	if ts := s.Timestamp; ts != nil {
		if !ts.IsValid() {
			c.bad = true
		}
		out.Timestamp = &schemas.Timestamp{Time: ts.AsTime()}
	}
	return out
}

func (c *conv) fromStatusEvent(e *a2apb.TaskStatusUpdateEvent) *schemas.TaskStatusUpdateEvent {
	if e == nil || e.Generation < 0 {
		c.bad = true
		return nil
	}
	out := &schemas.TaskStatusUpdateEvent{TaskID: e.TaskId, ContextID: e.ContextId, Metadata: c.mapOf(e.Metadata), Generation: schemas.Generation(e.Generation)}
	if e.Status != nil {
		out.Status = c.fromStatus(e.Status)
	}
	return out
}

func (c *conv) fromArtifactEvent(e *a2apb.TaskArtifactUpdateEvent) *schemas.TaskArtifactUpdateEvent {
	if e == nil || e.Generation < 0 {
		c.bad = true
		return nil
	}
	out := &schemas.TaskArtifactUpdateEvent{TaskID: e.TaskId, ContextID: e.ContextId, Append: e.Append, LastChunk: e.LastChunk,
		Metadata: c.mapOf(e.Metadata), Generation: schemas.Generation(e.Generation)}
	if e.Artifact != nil {
		out.Artifact = c.fromArtifact(e.Artifact)
	}
	return out
}

func (c *conv) fromArtifact(a *a2apb.Artifact) schemas.Artifact {
	if a == nil {
		c.bad = true
		return schemas.Artifact{}
	}
	return schemas.Artifact{ArtifactID: a.ArtifactId, Name: a.Name, Description: a.Description, Parts: c.fromParts(a.Parts),
		Metadata: c.mapOf(a.Metadata), Extensions: nonEmpty(a.Extensions)}
}

func (c *conv) fromMessage(m *a2apb.Message) *schemas.Message {
	if m == nil {
		c.bad = true
		return &schemas.Message{}
	}
	return &schemas.Message{MessageID: m.MessageId, ContextID: m.ContextId, TaskID: m.TaskId, Role: schemas.Role(c.enumName(a2apb.Role_name, int32(m.Role))),
		Parts: c.fromParts(m.Parts), Metadata: c.mapOf(m.Metadata), Extensions: nonEmpty(m.Extensions), ReferenceTaskIDs: nonEmpty(m.ReferenceTaskIds)}
}

func (c *conv) fromParts(ps []*a2apb.Part) []schemas.Part {
	if len(ps) == 0 {
		return nil
	}
	out := make([]schemas.Part, len(ps))
	for i, p := range ps {
		if p == nil {
			c.bad = true
			continue
		}
		q := schemas.Part{Metadata: c.mapOf(p.Metadata), Filename: p.Filename, MediaType: p.MediaType}
		switch v := p.Content.(type) {
		case *a2apb.Part_Text:
			s := v.Text
			q.Text = &s
		case *a2apb.Part_Raw:
			if len(v.Raw) == 0 {
				c.bad = true
			}
			q.Raw = v.Raw
		case *a2apb.Part_Url:
			s := v.Url
			q.URL = &s
		case *a2apb.Part_Data:
			b, err := protojson.Marshal(v.Data)
			if err != nil {
				c.bad = true
			}
			// protojson varies its spacing on purpose; the data is kept
			// compact, as the JSON path's re-encoding writes it.
			var buf bytes.Buffer
			if json.Compact(&buf, b) != nil {
				c.bad = true
			}
			q.Data = buf.Bytes()
		}
		out[i] = q
	}
	return out
}

// enumName is an enum value's name as the JSON path gives it: none for
// the zero value (proto3 leaves it out), and a number no name has gives
// up.
func (c *conv) enumName(names map[int32]string, v int32) string {
	if v == 0 {
		return ""
	}
	name, ok := names[v]
	if !ok {
		c.bad = true
	}
	return name
}

// mapOf is a Struct as a metadata map (nil for none).
func (c *conv) mapOf(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}
