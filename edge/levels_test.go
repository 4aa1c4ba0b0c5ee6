package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// What each trust level may do, on every binding: the levels below come
// from the source address (127.0.0.2 a partner, 127.0.0.3 open), and each
// binding's client sends from one of them, so the level is the front
// door's decision whatever the wire.

// sourced sends one message from a source address to an agent, naming a
// skill in its metadata ("" for none), on one binding; it returns the A2A
// reason of its refusal ("" when it was accepted).
type sourced struct {
	name string
	send func(t *testing.T, src, agent, skill, text string) string
}

// skillMeta is the message metadata naming skill.
func skillMeta(skill string) map[string]any {
	if skill == "" {
		return nil
	}
	return map[string]any{schemas.MetaSkill: skill}
}

// postFrom posts body to url from src and returns the answer.
func postFrom(t *testing.T, src, url, version, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := from(src).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// codeReason is the A2A reason of an answer carrying a JSON-RPC error
// object, {"error":{"code":…}} (JSON-RPC, and OpenFang's routes).
func codeReason(t *testing.T, raw []byte) string {
	t.Helper()
	var r struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("not an answer: %s", raw)
	}
	if r.Error == nil {
		return ""
	}
	return rpcReason(r.Error.Code)
}

// sourcedBindings are the bindings that carry a send, each from a source
// address: JSON-RPC 1.0 and 0.3, the older tasks/send, HTTP+JSON,
// OpenFang's route, gRPC, and the in-process door the MCP bridge calls.
func sourcedBindings(t *testing.T, base string, e *edge.Server) []sourced {
	msg10 := func(text, skill string) map[string]any {
		m := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		if md := skillMeta(skill); md != nil {
			m["metadata"] = md
		}
		return m
	}
	legacy := func(text, skill string) map[string]any {
		p := legacyParams(schemas.NewID(), "", text)
		if md := skillMeta(skill); md != nil {
			p["message"].(map[string]any)["metadata"] = md
		}
		return p
	}
	door := e.InProcess("mcp")
	grpcOf := grpcFrom(t, e)
	return []sourced{
		{"JSON-RPC 1.0", func(t *testing.T, src, agent, skill, text string) string {
			_, raw := postFrom(t, src, base+"/agents/"+agent, "1.0", rpcBody(1, "SendMessage", map[string]any{"message": msg10(text, skill)}))
			return codeReason(t, raw)
		}},
		{"JSON-RPC 0.3", func(t *testing.T, src, agent, skill, text string) string {
			m := map[string]any{"kind": "message", "messageId": schemas.NewID(), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
			if md := skillMeta(skill); md != nil {
				m["metadata"] = md
			}
			_, raw := postFrom(t, src, base+"/agents/"+agent, "0.3", rpcBody(1, "message/send", map[string]any{"message": m}))
			return codeReason(t, raw)
		}},
		{"tasks/send", func(t *testing.T, src, agent, skill, text string) string {
			_, raw := postFrom(t, src, base+"/agents/"+agent, "", rpcBody(1, "tasks/send", legacy(text, skill)))
			return codeReason(t, raw)
		}},
		{"HTTP+JSON", func(t *testing.T, src, agent, skill, text string) string {
			b, _ := json.Marshal(map[string]any{"message": msg10(text, skill)})
			status, raw := postFrom(t, src, base+"/agents/"+agent+"/message:send", "1.0", string(b))
			if status == http.StatusOK {
				return ""
			}
			var st struct {
				Error struct {
					Details []struct {
						Reason string `json:"reason"`
					} `json:"details"`
				} `json:"error"`
			}
			if json.Unmarshal(raw, &st) != nil || len(st.Error.Details) == 0 {
				t.Fatalf("HTTP+JSON: %d %s", status, raw)
			}
			return st.Error.Details[0].Reason
		}},
		{"OpenFang", func(t *testing.T, src, agent, skill, text string) string {
			_, raw := postFrom(t, src, base+"/a2a/tasks/send?agent="+agent, "", rpcBody(1, "tasks/send", legacy(text, skill)))
			return codeReason(t, raw)
		}},
		{"gRPC", func(t *testing.T, src, agent, skill, text string) string {
			m := &a2apb.Message{MessageId: schemas.NewID(), Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: text}}}}
			if md := skillMeta(skill); md != nil {
				m.Metadata, _ = structpb.NewStruct(md)
			}
			_, err := grpcOf(src).SendMessage(context.Background(), &a2apb.SendMessageRequest{Tenant: schemas.AgentTenant("", agent), Message: m})
			if err == nil {
				return ""
			}
			st, _ := status.FromError(err)
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					return info.GetReason()
				}
			}
			return "gRPC " + st.Code().String()
		}},
		{"in-process (MCP)", func(t *testing.T, src, agent, skill, text string) string {
			m := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}, Metadata: skillMeta(skill)}
			_, err := door.SendMessage(context.Background(), schemas.Presented{RemoteAddr: src + ":4000"}, agent, &schemas.SendMessageRequest{Message: m})
			if err == nil {
				return ""
			}
			return schemas.AsError(err).Reason
		}},
	}
}

// grpcFrom serves e's gRPC binding on a loopback port and returns a
// client of it whose connections come from a given loopback address.
func grpcFrom(t *testing.T, e *edge.Server) func(src string) a2apb.A2AServiceClient {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcbinding.NewServer(e.InProcess("grpc"), grpcbinding.Options{MaxMessageBytes: 1 << 20})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(time.Second); <-served })
	clients := map[string]a2apb.A2AServiceClient{}
	return func(src string) a2apb.A2AServiceClient {
		if c, ok := clients[src]; ok {
			return c
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients[src] = a2apb.NewA2AServiceClient(conn)
		return clients[src]
	}
}

// oneSkill is an agent whose card offers one skill, id; it answers "ok".
func oneSkill(name, id string) workers.Definition {
	return workers.Definition{Name: name, Card: schemas.AgentCard{Name: name, Description: "one skill", Version: "1",
		Skills: []schemas.AgentSkill{{ID: id, Name: id, Description: "the one skill", Tags: []string{id}}}},
		Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
			return out.Artifact(ctx, schemas.Artifact{ArtifactID: "ok", Parts: []schemas.Part{schemas.TextPart("ok")}})
		})}
}

// levelRules give 127.0.0.2 the level partner, 127.0.0.3 the level open.
var levelRules = []edge.TrustRule{
	{Level: "partner", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}},
	{Level: "open", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}},
}

// A level's agent and skill lists hold on every binding: a message is
// admitted for a listed skill its agent offers, named in its metadata or
// the one skill of an agent offering one; a message naming none to an
// agent offering several, a skill not listed, a listed skill the agent
// does not offer, and an agent not listed are refused with the
// authorization error; a caller of another level is not held to them.
func TestTrustLevelAgentsAndSkillsOnEveryBinding(t *testing.T) {
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), oneSkill("solo", "only"), oneSkill("other", "only")},
		edge: edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: levelRules,
			Levels: map[string]edge.TrustLevel{"partner": {Agents: []string{"echo", "solo"}, Skills: []string{"ask", "only"}}}}}})
	denied := schemas.ErrPermissionDenied.Reason
	for _, b := range sourcedBindings(t, h.url, h.edges[0]) {
		t.Run(b.name, func(t *testing.T) {
			for _, c := range []struct {
				what, src, agent, skill, want string
			}{
				{"the one skill of an agent offering one", "127.0.0.2", "solo", "", ""},
				{"a listed skill, named", "127.0.0.2", "echo", "ask", ""},
				{"no skill named, to an agent offering two", "127.0.0.2", "echo", "", denied},
				{"a skill the level does not list", "127.0.0.2", "echo", "echo", denied},
				{"a listed skill the agent does not offer", "127.0.0.2", "echo", "only", denied},
				{"an agent the level does not list", "127.0.0.2", "other", "only", denied},
				{"another level, naming no skill", "127.0.0.3", "echo", "", ""},
				{"another level, to any agent", "127.0.0.3", "other", "", ""},
			} {
				if got := b.send(t, c.src, c.agent, c.skill, "hi"); got != c.want {
					t.Errorf("%s: refused with %q, want %q", c.what, got, c.want)
				}
			}
		})
	}
}

// A follow-up is held to the level's skills as a new message is: it names
// its skill again (or its agent offers one).
func TestTrustLevelSkillsHoldFollowUps(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: levelRules,
			Levels: map[string]edge.TrustLevel{"partner": {Skills: []string{"ask"}}}}}})
	send := func(text, skill, taskID string) (schemas.Task, string) {
		m := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		if md := skillMeta(skill); md != nil {
			m["metadata"] = md
		}
		if taskID != "" {
			m["taskId"] = taskID
		}
		_, raw := postFrom(t, "127.0.0.2", h.url+"/agents/echo", "1.0", rpcBody(1, "SendMessage", map[string]any{"message": m}))
		var r struct {
			Result struct {
				Task schemas.Task `json:"task"`
			} `json:"result"`
		}
		_ = json.Unmarshal(raw, &r)
		return r.Result.Task, codeReason(t, raw)
	}
	task, r := send(workers.AskCommand, "ask", "")
	if r != "" || task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("the first message: %q, %s", r, task.Status.State)
	}
	if _, r := send("the answer", "", task.ID); r != schemas.ErrPermissionDenied.Reason {
		t.Errorf("a follow-up naming no skill: refused with %q, want %q", r, schemas.ErrPermissionDenied.Reason)
	}
	if got, r := send("the answer", "ask", task.ID); r != "" || got.Status.State != schemas.TaskStateCompleted {
		t.Errorf("a follow-up naming its skill: %q, %s", r, got.Status.State)
	}
}

// A level's rate is the front door's for its callers on every binding:
// at rate ~0 and burst 1, the partner's second call is refused, on each
// binding, while the open level's calls pass.
func TestTrustLevelRateOnEveryBinding(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: levelRules,
			Levels: map[string]edge.TrustLevel{"partner": {Limits: edge.LevelLimits{Rate: 0.001, Burst: 1}}}}}})
	bindings := sourcedBindings(t, h.url, h.edges[0])
	if r := bindings[0].send(t, "127.0.0.2", "echo", "", "first"); r != "" {
		t.Fatalf("the partner's first call: refused with %q", r)
	}
	limited := schemas.ErrRateLimited.Reason
	for _, b := range bindings {
		if r := b.send(t, "127.0.0.2", "echo", "", "again"); r != limited {
			t.Errorf("%s: the partner's next call refused with %q, want %q", b.name, r, limited)
		}
		for range 2 {
			if r := b.send(t, "127.0.0.3", "echo", "", "open"); r != "" {
				t.Errorf("%s: the open level's call refused with %q", b.name, r)
			}
		}
	}
}

// A level's body bound, its streams per caller and its quota of
// unfinished tasks hold for its callers and no one else's.
func TestTrustLevelBodyStreamsAndQuota(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: newBlocker()}},
		edge: edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: levelRules,
			Levels: map[string]edge.TrustLevel{"partner": {Limits: edge.LevelLimits{MaxBodyBytes: 4 << 10, MaxStreams: 1}}}}}})
	bindings := sourcedBindings(t, h.url, h.edges[0])
	rpc, inProcess := bindings[0], bindings[len(bindings)-1]

	t.Run("body", func(t *testing.T) {
		big := strings.Repeat("b", 6<<10)
		if r := rpc.send(t, "127.0.0.2", "echo", "", big); r != schemas.ErrInvalidRequest.Reason {
			t.Errorf("the partner's body past its level's bound: refused with %q, want %q", r, schemas.ErrInvalidRequest.Reason)
		}
		if r := inProcess.send(t, "127.0.0.2", "echo", "", big); r != schemas.ErrInvalidParams.Reason {
			t.Errorf("the partner's message past its level's bound, in process: refused with %q, want %q", r, schemas.ErrInvalidParams.Reason)
		}
		for _, b := range []sourced{rpc, inProcess} {
			if r := b.send(t, "127.0.0.3", "echo", "", big); r != "" {
				t.Errorf("%s: the open level's big message refused with %q", b.name, r)
			}
		}
	})

	t.Run("streams", func(t *testing.T) {
		door := h.edges[0].InProcess("mcp")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stream := func(src, agent string, each func() error) error {
			m := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hold")}}
			return door.SendStreamingMessage(ctx, schemas.Presented{RemoteAddr: src + ":4000"}, agent, &schemas.SendMessageRequest{Message: m},
				func(string, *schemas.StreamResponse) error { return each() })
		}
		var second, other error
		first := stream("127.0.0.2", "slow", func() error {
			if second == nil && other == nil { // once, while this stream is open
				second = stream("127.0.0.2", "echo", func() error { return nil })
				other = stream("127.0.0.3", "echo", func() error { return nil })
				if second == nil {
					second = errors.New("admitted")
				}
				if other == nil {
					other = errors.New("none")
				}
			}
			return errStopStream
		})
		if !errors.Is(first, errStopStream) {
			t.Fatalf("the partner's first stream: %v", first)
		}
		if !errors.Is(second, schemas.ErrRateLimited) {
			t.Errorf("the partner's second stream while its first is open: %v, want %v", second, schemas.ErrRateLimited)
		}
		if other.Error() != "none" {
			t.Errorf("the open level's stream meanwhile: %v", other)
		}
		if err := stream("127.0.0.2", "echo", func() error { return nil }); err != nil {
			t.Errorf("the partner's stream once its first ended: %v", err)
		}
	})

	t.Run("unfinished", func(t *testing.T) {
		// Another edge of the bus, whose partner level has a quota of one
		// unfinished task (the partner's stream above left one running).
		url := h.startEdge(h.b, edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: levelRules,
			Levels: map[string]edge.TrustLevel{"partner": {Limits: edge.LevelLimits{MaxUnfinished: 1}}}}})
		h.waitAgent(url, "echo")
		bindings := sourcedBindings(t, url, h.edges[len(h.edges)-1])
		rpc := bindings[0]
		// The edge's index follows the store within milliseconds of a
		// write: the partner's sends of tasks that wait for input pass
		// until it sees one.
		deadline := time.Now().Add(10 * time.Second)
		r := rpc.send(t, "127.0.0.2", "echo", "", workers.AskCommand)
		for ; r == "" && time.Now().Before(deadline); r = rpc.send(t, "127.0.0.2", "echo", "", workers.AskCommand) {
		}
		if r != schemas.ErrRateLimited.Reason {
			t.Fatalf("the partner past its level's quota: refused with %q, want %q", r, schemas.ErrRateLimited.Reason)
		}
		for _, b := range bindings {
			if r := b.send(t, "127.0.0.2", "echo", "", workers.AskCommand); r != schemas.ErrRateLimited.Reason {
				t.Errorf("%s: the partner past its quota refused with %q, want %q", b.name, r, schemas.ErrRateLimited.Reason)
			}
		}
		for range 3 {
			if r := rpc.send(t, "127.0.0.3", "echo", "", workers.AskCommand); r != "" {
				t.Errorf("the open level's unfinished tasks refused with %q", r)
			}
		}
	})
}

// errStopStream ends a stream from its consumer.
var errStopStream = errors.New("stop the stream")

// A rule naming a tenant gives its level to a call acting in that tenant,
// also when the call names it in its request (the level is decided again
// when the front door moves the call there): the tenant's level is on the
// task, and its rate applies.
func TestTrustLevelOfTheTenantACallNames(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice", Tenants: []string{"t1", "t2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{trustOf("whoami")}, edge: edge.Config{Auth: a, DefaultAgent: "whoami",
		Trust: edge.TrustPolicy{Rules: []edge.TrustRule{{Level: "partner", Tenants: []string{"t2"}}},
			Levels: map[string]edge.TrustLevel{"partner": {Limits: edge.LevelLimits{Rate: 0.001, Burst: 1}}}}}})
	send := func(tenant string) (string, string) {
		params := map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}}
		if tenant != "" {
			params["tenant"] = tenant
		}
		_, _, raw := as(t, aliceKey, "POST", h.url+"/agents/whoami", "application/json", rpcBody(1, "SendMessage", params))
		var r struct {
			Result struct {
				Task schemas.Task `json:"task"`
			} `json:"result"`
		}
		_ = json.Unmarshal(raw, &r)
		if arts := r.Result.Task.Artifacts; len(arts) == 1 {
			return *arts[0].Parts[0].Text, codeReason(t, raw)
		}
		return "", codeReason(t, raw)
	}
	for _, c := range []struct{ tenant, level, refused string }{
		{"", edge.TrustLocal, ""}, {"t2", "partner", ""}, {"t2", "", schemas.ErrRateLimited.Reason}, {"t1", edge.TrustLocal, ""},
	} {
		if level, r := send(c.tenant); level != c.level || r != c.refused {
			t.Errorf("alice in tenant %q: level %q, refused with %q; want %q, %q", c.tenant, level, r, c.level, c.refused)
		}
	}
}
