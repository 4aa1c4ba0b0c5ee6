package edge_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/workers"
)

// Golden tests from the seed documents (/work/shared/seeds): the requests
// OpenFang, AgentOS and LiteLLM-RS clients send, as the documents print
// them, sent to a2abus over real HTTP, and the answers checked field by
// field against what the documents show. The fixtures are in
// testdata/seeds; its README.md says which are the document's bytes and
// which are the nearest valid JSON to what the document prints.
//
// Every request goes out as those clients send it: Content-Type
// application/json and no A2A-Version header.

// openFangClient is the header OpenFang's A2aClient sends (000, "External
// Agent Discovery").
var openFangClient = map[string]string{"User-Agent": "OpenFang/0.1 A2A"}

// openFangTaskFields are the fields of OpenFang's A2aTask.
var openFangTaskFields = []string{"id", "sessionId", "status", "messages", "artifacts"}

// unknownTaskIDs are task ids nobody created: the id of the document's
// example response, and a client-style one.
var unknownTaskIDs = []string{"550e8400-e29b-41d4-a716-446655440000", "no-such-task"}

func readSeed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeJSON decodes one JSON value into generic values (numbers as
// json.Number).
func decodeJSON(t testing.TB, what string, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, b)
	}
	if _, err := d.Token(); err != io.EOF {
		t.Fatalf("%s has data after its JSON value:\n%s", what, b)
	}
	return v
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func asObject(t testing.TB, what string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is a JSON %s, want an object: %v", what, jsonKind(v), v)
	}
	return m
}

func asArray(t testing.TB, what string, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%s is a JSON %s, want an array: %v", what, jsonKind(v), v)
	}
	return a
}

func asString(t testing.TB, what string, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s is a JSON %s, want a string: %v", what, jsonKind(v), v)
	}
	return s
}

func asBool(t testing.TB, what string, v any) bool {
	t.Helper()
	b, ok := v.(bool)
	if !ok {
		t.Fatalf("%s is a JSON %s, want a boolean: %v", what, jsonKind(v), v)
	}
	return b
}

// seedParams returns the params object of a JSON-RPC fixture.
func seedParams(t testing.TB, name string) map[string]any {
	t.Helper()
	return asObject(t, name+" params", asObject(t, name, decodeJSON(t, name, readSeed(t, name)))["params"])
}

// rewriteSeed decodes a fixture, lets edit change it and encodes it again,
// for requests a test needs in a variant the document does not print (a
// message that makes the echo agent wait, another task id).
func rewriteSeed(t testing.TB, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	m := asObject(t, name, decodeJSON(t, name, readSeed(t, name)))
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setText replaces the text of the first part of params.message.
func setText(t testing.TB, m map[string]any, text string) {
	t.Helper()
	msg := asObject(t, "params.message", asObject(t, "params", m["params"])["message"])
	asObject(t, "params.message.parts[0]", asArray(t, "params.message.parts", msg["parts"])[0])["text"] = text
}

// shapeDiff lists where got lacks a field that the document's example doc
// has, or has it with another JSON type. Values are not compared (ids and
// texts differ). In arrays every element of got is held to the example's
// first element. Paths in optional ("$.a.b", "[]" for any array element)
// may be absent; at is the same path with the elements' indexes, for the
// report.
func shapeDiff(doc, got any, path, at string, optional map[string]bool) []string {
	if jsonKind(doc) != jsonKind(got) {
		return []string{fmt.Sprintf("%s is a JSON %s, the document has a %s", at, jsonKind(got), jsonKind(doc))}
	}
	var diffs []string
	switch d := doc.(type) {
	case map[string]any:
		g := got.(map[string]any)
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				if !optional[path+"."+k] {
					diffs = append(diffs, at+"."+k+" is missing")
				}
				continue
			}
			diffs = append(diffs, shapeDiff(d[k], gv, path+"."+k, at+"."+k, optional)...)
		}
	case []any:
		if len(d) > 0 {
			for i, gv := range got.([]any) {
				diffs = append(diffs, shapeDiff(d[0], gv, path+"[]", fmt.Sprintf("%s[%d]", at, i), optional)...)
			}
		}
	}
	return diffs
}

func checkShape(t testing.TB, what, fixture string, got any, optional map[string]bool) {
	t.Helper()
	doc := decodeJSON(t, fixture, readSeed(t, fixture))
	if diffs := shapeDiff(doc, got, "$", "$", optional); len(diffs) > 0 {
		t.Fatalf("%s does not have the shape %s documents:\n  %s\ngot: %v", what, fixture, strings.Join(diffs, "\n  "), got)
	}
}

// seedReply is a raw HTTP answer.
type seedReply struct {
	status int
	body   []byte
}

// seedDo sends body to url as the seed systems' clients do.
func seedDo(t testing.TB, method, url string, body []byte, header map[string]string) *seedReply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return &seedReply{status: resp.StatusCode, body: b}
}

// okObject checks an HTTP 200 answer holding a JSON object.
func (r *seedReply) okObject(t testing.TB, what string) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%s: HTTP %d, want 200: %s", what, r.status, r.body)
	}
	return asObject(t, what, decodeJSON(t, what, r.body))
}

// rpcResult checks a JSON-RPC 2.0 success answer that echoes the request id
// (wantID is the id as JSON: `1`, `"req-123"`) and returns its result.
func rpcResult(t testing.TB, what string, r *seedReply, wantID string) any {
	t.Helper()
	env := r.okObject(t, what)
	if env["jsonrpc"] != "2.0" {
		t.Fatalf("%s: jsonrpc = %v, want \"2.0\": %s", what, env["jsonrpc"], r.body)
	}
	if id, _ := json.Marshal(env["id"]); string(id) != wantID {
		t.Fatalf("%s: id = %s, want the request's id %s: %s", what, id, wantID, r.body)
	}
	if e, ok := env["error"]; ok {
		t.Fatalf("%s: JSON-RPC error, want a result: %v", what, e)
	}
	res, ok := env["result"]
	if !ok {
		t.Fatalf("%s: no result: %s", what, r.body)
	}
	return res
}

// rpcErrorCode checks a JSON-RPC 2.0 error answer with code that echoes the
// request id.
func rpcErrorCode(t testing.TB, what string, r *seedReply, wantID string, code int) {
	t.Helper()
	env := r.okObject(t, what)
	if id, _ := json.Marshal(env["id"]); string(id) != wantID {
		t.Fatalf("%s: id = %s, want the request's id %s: %s", what, id, wantID, r.body)
	}
	if _, ok := env["result"]; ok {
		t.Fatalf("%s: a result, want error %d: %s", what, code, r.body)
	}
	e := asObject(t, what+" error", env["error"])
	if got := fmt.Sprint(e["code"]); got != fmt.Sprint(code) {
		t.Fatalf("%s: error code %s, want %d: %s", what, got, code, r.body)
	}
	if asString(t, what+" error.message", e["message"]) == "" {
		t.Fatalf("%s: error without a message: %s", what, r.body)
	}
}

// artifactText checks an artifact holds only text parts (type "text") and
// returns their text, concatenated.
func artifactText(t testing.TB, what string, v any) string {
	t.Helper()
	a := asObject(t, what, v)
	if n, ok := a["name"]; ok {
		asString(t, what+".name", n)
	}
	var text strings.Builder
	for i, p := range asArray(t, what+".parts", a["parts"]) {
		part := asObject(t, fmt.Sprintf("%s.parts[%d]", what, i), p)
		if part["type"] != "text" {
			t.Fatalf("%s.parts[%d].type = %v, want \"text\"", what, i, part["type"])
		}
		text.WriteString(asString(t, fmt.Sprintf("%s.parts[%d].text", what, i), part["text"]))
	}
	return text.String()
}

// checkMessageParts checks every part of a message has a type, and text
// parts a text.
func checkMessageParts(t testing.TB, what string, m map[string]any) {
	t.Helper()
	for i, p := range asArray(t, what+".parts", m["parts"]) {
		part := asObject(t, fmt.Sprintf("%s.parts[%d]", what, i), p)
		if typ := asString(t, fmt.Sprintf("%s.parts[%d].type", what, i), part["type"]); typ == "text" {
			asString(t, fmt.Sprintf("%s.parts[%d].text", what, i), part["text"])
		}
	}
}

// openFangWant is what an OpenFang-shaped task must hold.
type openFangWant struct {
	id        string // "" = any non-empty, server-made id
	sessionID string
	status    string // OpenFang's plain-string status
	message   any    // the user's message as sent
	echoed    string // the echo agent's artifact text; "" = no artifact
}

// checkOpenFangTask checks a bare task in OpenFang's shape (000 "Response
// (completed task)"): id, sessionId, a plain-string status, messages with
// the user's message first exactly as sent and agent messages after it,
// and artifacts.
func checkOpenFangTask(t testing.TB, what string, body []byte, want openFangWant) map[string]any {
	t.Helper()
	task := asObject(t, what, decodeJSON(t, what, body))
	for _, k := range []string{"jsonrpc", "result", "error"} {
		if _, ok := task[k]; ok {
			t.Fatalf("%s: the answer has %q; OpenFang answers the bare task, not a JSON-RPC envelope: %s", what, k, body)
		}
	}
	checkShape(t, what, "openfang-send-response.json", task, nil)
	id := asString(t, what+" id", task["id"])
	if id == "" || (want.id != "" && id != want.id) {
		t.Fatalf("%s: id = %q, want %q (non-empty)", what, id, want.id)
	}
	if got := asString(t, what+" sessionId", task["sessionId"]); got != want.sessionID {
		t.Fatalf("%s: sessionId = %q, want %q", what, got, want.sessionID)
	}
	if got := asString(t, what+" status", task["status"]); got != want.status {
		t.Fatalf("%s: status = %q, want %q", what, got, want.status)
	}
	msgs := asArray(t, what+" messages", task["messages"])
	if len(msgs) == 0 || !reflect.DeepEqual(msgs[0], want.message) {
		t.Fatalf("%s: messages must start with the user's message exactly as sent\n want %v\n  got %v", what, want.message, msgs)
	}
	for i, m := range msgs[1:] {
		mm := asObject(t, fmt.Sprintf("%s messages[%d]", what, i+1), m)
		if mm["role"] != "agent" {
			t.Fatalf("%s: messages[%d].role = %v, want \"agent\" after the user's message", what, i+1, mm["role"])
		}
		checkMessageParts(t, fmt.Sprintf("%s messages[%d]", what, i+1), mm)
	}
	arts := asArray(t, what+" artifacts", task["artifacts"])
	if want.echoed == "" {
		if len(arts) != 0 {
			t.Fatalf("%s: artifacts = %v, want none", what, arts)
		}
	} else {
		if len(arts) != 1 {
			t.Fatalf("%s: %d artifacts, want the echo agent's one: %v", what, len(arts), arts)
		}
		if got := artifactText(t, what+" artifacts[0]", arts[0]); got != want.echoed {
			t.Fatalf("%s: artifact text %q, want the sent text %q", what, got, want.echoed)
		}
	}
	return task
}

// legacyWant is what a task of the older JSON-RPC dialect must hold.
type legacyWant struct {
	id        string // "" = any non-empty, server-made id
	sessionID string
	state     string // status.state, A2A's spelling
	message   any    // the user's message as sent
	echoed    string // the echo agent's artifact text; "" = not checked
	history   bool   // history is required (else checked when present)
}

// checkLegacyTask checks a JSON-RPC tasks/send|get|cancel result in the
// older dialect: {id, sessionId, status: {state, timestamp}, history (the
// user's message first), artifacts}.
func checkLegacyTask(t testing.TB, what string, result any, want legacyWant) map[string]any {
	t.Helper()
	task := asObject(t, what+" result", result)
	id := asString(t, what+" result.id", task["id"])
	if id == "" || (want.id != "" && id != want.id) {
		t.Fatalf("%s: result.id = %q, want %q (non-empty)", what, id, want.id)
	}
	if got := asString(t, what+" result.sessionId", task["sessionId"]); got != want.sessionID {
		t.Fatalf("%s: result.sessionId = %q, want %q", what, got, want.sessionID)
	}
	status := asObject(t, what+" result.status", task["status"])
	if got := asString(t, what+" result.status.state", status["state"]); got != want.state {
		t.Fatalf("%s: result.status.state = %q, want %q", what, got, want.state)
	}
	ts := asString(t, what+" result.status.timestamp", status["timestamp"])
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Fatalf("%s: result.status.timestamp %q is not an RFC 3339 time: %v", what, ts, err)
	}
	if _, ok := task["history"]; want.history && !ok {
		t.Fatalf("%s: result has no history, want the user's message in it", what)
	}
	if h, ok := task["history"]; ok {
		hist := asArray(t, what+" result.history", h)
		if len(hist) == 0 || !reflect.DeepEqual(hist[0], want.message) {
			t.Fatalf("%s: result.history must start with the user's message exactly as sent\n want %v\n  got %v", what, want.message, hist)
		}
	}
	if want.echoed != "" {
		arts := asArray(t, what+" result.artifacts", task["artifacts"])
		if len(arts) != 1 {
			t.Fatalf("%s: %d artifacts, want the echo agent's one: %v", what, len(arts), arts)
		}
		if got := artifactText(t, what+" result.artifacts[0]", arts[0]); got != want.echoed {
			t.Fatalf("%s: artifact text %q, want the sent text %q", what, got, want.echoed)
		}
	}
	return task
}

func echoHarness(t *testing.T, extra ...workers.Definition) *harness {
	t.Helper()
	return newHarness(t, harnessOptions{
		agents: append([]workers.Definition{workers.EchoDefinition("echo")}, extra...),
		edge:   edge.Config{DefaultAgent: "echo"},
	})
}

// OpenFang (000 and 001, "POST /a2a/tasks/send"): the printed JSON-RPC
// request, byte for byte, answered with the bare task in OpenFang's shape
// once the task has finished.
func TestSeedOpenFangSendVerbatim(t *testing.T) {
	h := echoHarness(t)
	seen := map[string]string{}
	for _, name := range []string{"openfang-send.json", "openfang-send.001.json"} {
		t.Run(name, func(t *testing.T) {
			r := seedDo(t, "POST", h.url+"/a2a/tasks/send", readSeed(t, name), openFangClient)
			if r.status != http.StatusOK {
				t.Fatalf("HTTP %d, want 200: %s", r.status, r.body)
			}
			task := checkOpenFangTask(t, "POST /a2a/tasks/send", r.body, openFangWant{
				sessionID: "optional-session-id",
				status:    "completed",
				message:   seedParams(t, name)["message"],
				echoed:    "Review this code for security issues",
			})
			id := task["id"].(string)
			if prev, ok := seen[id]; ok {
				t.Fatalf("two sends got the same task id %s (%s and %s)", id, prev, name)
			}
			seen[id] = name
		})
	}
}

// The same route still takes the params object alone as the body (the form
// a2abus accepted before), here the printed request's params, byte for
// byte, without a task id.
func TestSeedOpenFangSendParamsOnlyBody(t *testing.T) {
	h := echoHarness(t)
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(readSeed(t, "openfang-send.json"), &env); err != nil {
		t.Fatal(err)
	}
	r := seedDo(t, "POST", h.url+"/a2a/tasks/send", env.Params, openFangClient)
	task := r.okObject(t, "POST /a2a/tasks/send (params only)")
	if id, _ := task["id"].(string); id == "" {
		t.Fatalf("no task id: %s", r.body)
	}
	if task["sessionId"] != "optional-session-id" {
		t.Fatalf("sessionId = %v: %s", task["sessionId"], r.body)
	}
	// This body names no dialect, so either status shape is accepted: the
	// plain string or the older dialect's {state}.
	state, _ := task["status"].(string)
	if st, ok := task["status"].(map[string]any); ok {
		state, _ = st["state"].(string)
	}
	if state != "completed" {
		t.Fatalf("status = %v, want completed: %s", task["status"], r.body)
	}
	arts := asArray(t, "artifacts", task["artifacts"])
	if len(arts) != 1 || artifactText(t, "artifacts[0]", arts[0]) != "Review this code for security issues" {
		t.Fatalf("artifacts: %s", r.body)
	}
}

// A JSON-RPC envelope on POST /a2a/tasks/send whose method is not
// tasks/send is refused with method-not-found (-32601) and an HTTP 4xx.
func TestSeedOpenFangSendRefusesOtherMethods(t *testing.T) {
	h := echoHarness(t)
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/teleport"} {
		t.Run(method, func(t *testing.T) {
			body := rewriteSeed(t, "openfang-send.json", func(m map[string]any) { m["method"] = method })
			r := seedDo(t, "POST", h.url+"/a2a/tasks/send", body, openFangClient)
			if r.status < 400 || r.status > 499 {
				t.Fatalf("HTTP %d, want 4xx: %s", r.status, r.body)
			}
			e := asObject(t, "error", asObject(t, "body", decodeJSON(t, "body", r.body))["error"])
			if fmt.Sprint(e["code"]) != "-32601" {
				t.Fatalf("error.code = %v, want -32601: %s", e["code"], r.body)
			}
			if msg, _ := e["message"].(string); msg == "" {
				t.Fatalf("error without a message: %s", r.body)
			}
		})
	}
}

// OpenFang "GET /a2a/tasks/{id}": the id the send returned reads back the
// same task in OpenFang's shape; an id nobody created is 404.
func TestSeedOpenFangGetTaskByReturnedID(t *testing.T) {
	h := echoHarness(t)
	want := openFangWant{
		sessionID: "optional-session-id",
		status:    "completed",
		message:   seedParams(t, "openfang-send.json")["message"],
		echoed:    "Review this code for security issues",
	}
	r := seedDo(t, "POST", h.url+"/a2a/tasks/send", readSeed(t, "openfang-send.json"), openFangClient)
	if r.status != http.StatusOK {
		t.Fatalf("send: HTTP %d: %s", r.status, r.body)
	}
	sent := checkOpenFangTask(t, "send", r.body, want)
	want.id = sent["id"].(string)
	g := seedDo(t, "GET", h.url+"/a2a/tasks/"+want.id, nil, openFangClient)
	if g.status != http.StatusOK {
		t.Fatalf("GET /a2a/tasks/%s: HTTP %d, want 200: %s", want.id, g.status, g.body)
	}
	got := checkOpenFangTask(t, "GET /a2a/tasks/{id}", g.body, want)
	for _, k := range openFangTaskFields {
		if !reflect.DeepEqual(got[k], sent[k]) {
			t.Fatalf("GET answers %s = %v, the send answered %v", k, got[k], sent[k])
		}
	}
	for _, id := range unknownTaskIDs {
		if r := seedDo(t, "GET", h.url+"/a2a/tasks/"+id, nil, openFangClient); r.status != http.StatusNotFound {
			t.Fatalf("GET /a2a/tasks/%s: HTTP %d, want 404: %s", id, r.status, r.body)
		}
	}
}

// OpenFang "POST /a2a/tasks/{id}/cancel": a task waiting for input (the
// echo agent's /ask) is canceled, status "cancelled" in OpenFang's spelling;
// an id nobody created is 404.
func TestSeedOpenFangCancelInputRequiredTask(t *testing.T) {
	h := echoHarness(t)
	body := rewriteSeed(t, "openfang-send.json", func(m map[string]any) {
		setText(t, m, workers.AskCommand+" Review this code for security issues")
	})
	want := openFangWant{
		sessionID: "optional-session-id",
		status:    "input-required",
		message:   asObject(t, "params", asObject(t, "body", decodeJSON(t, "body", body))["params"])["message"],
	}
	r := seedDo(t, "POST", h.url+"/a2a/tasks/send", body, openFangClient)
	if r.status != http.StatusOK {
		t.Fatalf("send: HTTP %d: %s", r.status, r.body)
	}
	want.id = checkOpenFangTask(t, "send /ask", r.body, want)["id"].(string)

	c := seedDo(t, "POST", h.url+"/a2a/tasks/"+want.id+"/cancel", nil, openFangClient)
	if c.status != http.StatusOK {
		t.Fatalf("POST /a2a/tasks/%s/cancel: HTTP %d, want 200: %s", want.id, c.status, c.body)
	}
	want.status = "cancelled"
	checkOpenFangTask(t, "cancel", c.body, want)
	g := seedDo(t, "GET", h.url+"/a2a/tasks/"+want.id, nil, openFangClient)
	if g.status != http.StatusOK {
		t.Fatalf("GET after cancel: HTTP %d: %s", g.status, g.body)
	}
	checkOpenFangTask(t, "GET after cancel", g.body, want)

	for _, id := range unknownTaskIDs {
		if r := seedDo(t, "POST", h.url+"/a2a/tasks/"+id+"/cancel", nil, openFangClient); r.status != http.StatusNotFound {
			t.Fatalf("POST /a2a/tasks/%s/cancel: HTTP %d, want 404: %s", id, r.status, r.body)
		}
	}
}

// checkOpenFangCard checks an agent card has the fields of OpenFang's
// AgentCard (001's example card; stateTransitionHistory may be absent)
// with a2abus's values for the echo agent.
func checkOpenFangCard(t testing.TB, what string, h *harness, v any, name string) {
	t.Helper()
	card := asObject(t, what, v)
	checkShape(t, what, "openfang-agent-card.001.json", card, map[string]bool{"$.capabilities.stateTransitionHistory": true})
	if card["name"] != name {
		t.Fatalf("%s: name = %v, want %s", what, card["name"], name)
	}
	if url := asString(t, what+".url", card["url"]); url != h.url+"/agents/"+name {
		t.Fatalf("%s: url = %q, want the agent's JSON-RPC endpoint %s", what, url, h.url+"/agents/"+name)
	}
	for _, k := range []string{"description", "version"} {
		if asString(t, what+"."+k, card[k]) == "" {
			t.Fatalf("%s: empty %s", what, k)
		}
	}
	caps := asObject(t, what+".capabilities", card["capabilities"])
	asBool(t, what+".capabilities.streaming", caps["streaming"])
	asBool(t, what+".capabilities.pushNotifications", caps["pushNotifications"])
	var ids []string
	for i, s := range asArray(t, what+".skills", card["skills"]) {
		ids = append(ids, asString(t, fmt.Sprintf("%s.skills[%d].id", what, i), asObject(t, fmt.Sprintf("%s.skills[%d]", what, i), s)["id"]))
	}
	if strings.Join(ids, ",") != "echo,ask" {
		t.Fatalf("%s: skill ids %v, want the echo agent's [echo ask]", what, ids)
	}
	for _, k := range []string{"defaultInputModes", "defaultOutputModes"} {
		modes := asArray(t, what+"."+k, card[k])
		if len(modes) == 0 {
			t.Fatalf("%s: empty %s", what, k)
		}
		for i, m := range modes {
			asString(t, fmt.Sprintf("%s.%s[%d]", what, k, i), m)
		}
	}
}

// OpenFang "GET /a2a/agents": {"agents": [cards], "total": N}, each entry
// an agent card object (not a wrapper around one).
func TestSeedOpenFangAgentsListShape(t *testing.T) {
	h := echoHarness(t, workers.EchoDefinition("second"))
	list := seedDo(t, "GET", h.url+"/a2a/agents", nil, openFangClient).okObject(t, "GET /a2a/agents")
	checkShape(t, "GET /a2a/agents", "openfang-agents-response.json", list, map[string]bool{"$.agents[].capabilities.stateTransitionHistory": true})
	agents := asArray(t, "agents", list["agents"])
	if total := fmt.Sprint(list["total"]); total != fmt.Sprint(len(agents)) || len(agents) != 2 {
		t.Fatalf("total = %s with %d agents, want 2 and 2", total, len(agents))
	}
	var names []string
	for i, a := range agents {
		name := asString(t, fmt.Sprintf("agents[%d].name", i), asObject(t, fmt.Sprintf("agents[%d]", i), a)["name"])
		checkOpenFangCard(t, fmt.Sprintf("agents[%d]", i), h, a, name)
		names = append(names, name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "echo,second" {
		t.Fatalf("agents %v, want echo and second", names)
	}
}

// OpenFang "GET /.well-known/agent.json": the primary (default) agent's
// card with OpenFang's AgentCard fields.
func TestSeedOpenFangWellKnownAgentJSON(t *testing.T) {
	h := echoHarness(t, workers.EchoDefinition("second"))
	card := seedDo(t, "GET", h.url+"/.well-known/agent.json", nil, openFangClient).okObject(t, "GET /.well-known/agent.json")
	checkOpenFangCard(t, "/.well-known/agent.json", h, card, "echo")
}

// OpenFang's own A2aClient::send_task (000 and 001, "Sending Tasks to
// External Agents") sends tasks/send with no task id. Discovered the way
// it discovers (the url of /.well-known/agent.json) and at the root
// endpoint (the default agent), it gets a JSON-RPC result: the task in the
// older dialect under a server-made id, which tasks/get then reads (the
// document does not print get_task's request; this is the dialect's
// tasks/get {"id"}).
func TestSeedOpenFangClientSendWithoutTaskIDOnJSONRPCEndpoint(t *testing.T) {
	h := echoHarness(t)
	card := seedDo(t, "GET", h.url+"/.well-known/agent.json", nil, openFangClient).okObject(t, "GET /.well-known/agent.json")
	cardURL := asString(t, "card url", card["url"])
	seen := map[string]bool{}
	for _, name := range []string{"openfang-client-send.json", "openfang-client-send.001.json"} {
		for _, ep := range []struct{ label, url string }{{"card url", cardURL}, {"root", h.url + "/"}} {
			endpoint := ep.url
			t.Run(name+" to "+ep.label, func(t *testing.T) {
				want := legacyWant{
					sessionID: "session-123",
					state:     "completed",
					message:   seedParams(t, name)["message"],
					echoed:    "Analyze this dataset...",
				}
				res := rpcResult(t, "tasks/send", seedDo(t, "POST", endpoint, readSeed(t, name), openFangClient), `1`)
				want.id = checkLegacyTask(t, "tasks/send", res, want)["id"].(string)
				if seen[want.id] {
					t.Fatalf("task id %s was already given to an earlier send", want.id)
				}
				seen[want.id] = true
				get, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": map[string]any{"id": want.id}})
				checkLegacyTask(t, "tasks/get", rpcResult(t, "tasks/get", seedDo(t, "POST", endpoint, get, openFangClient), `2`), want)
			})
		}
	}
}

// AgentOS (002, "JSON-RPC Methods"): the printed tasks/send, tasks/get and
// tasks/cancel, byte for byte, at the agent's endpoint. The client's task
// id and session come back, and each answer echoes its request id; the
// printed cancel reaches a finished task and is refused as not cancelable
// (-32002).
func TestSeedAgentOSSendGetCancelVerbatim(t *testing.T) {
	h := echoHarness(t)
	endpoint := h.url + "/agents/echo"
	want := legacyWant{
		id:        "task-xyz-789",
		sessionID: "session-abc-123",
		history:   true,
		state:     "completed",
		message:   seedParams(t, "agentos-send.json")["message"],
		echoed:    "Analyze this data...",
	}
	res := rpcResult(t, "tasks/send", seedDo(t, "POST", endpoint, readSeed(t, "agentos-send.json"), nil), `"req-123"`)
	checkLegacyTask(t, "tasks/send", res, want)
	res = rpcResult(t, "tasks/get", seedDo(t, "POST", endpoint, readSeed(t, "agentos-get.json"), nil), `"req-124"`)
	checkLegacyTask(t, "tasks/get", res, want)
	rpcErrorCode(t, "tasks/cancel of a completed task", seedDo(t, "POST", endpoint, readSeed(t, "agentos-cancel.json"), nil), `"req-125"`, -32002)
}

// AgentOS tasks/cancel on a task waiting for input (the printed requests
// with another task id and the echo agent's /ask): status.state "canceled",
// A2A's spelling, which the JSON-RPC dialect keeps.
func TestSeedAgentOSCancelInputRequiredTask(t *testing.T) {
	h := echoHarness(t)
	endpoint := h.url + "/agents/echo"
	const taskID = "task-ask-789"
	send := rewriteSeed(t, "agentos-send.json", func(m map[string]any) {
		asObject(t, "params", m["params"])["id"] = taskID
		setText(t, m, workers.AskCommand+" Analyze this data...")
	})
	want := legacyWant{
		id:        taskID,
		sessionID: "session-abc-123",
		history:   true,
		state:     "input-required",
		message:   asObject(t, "params", asObject(t, "body", decodeJSON(t, "body", send))["params"])["message"],
	}
	checkLegacyTask(t, "tasks/send /ask", rpcResult(t, "tasks/send", seedDo(t, "POST", endpoint, send, nil), `"req-123"`), want)
	withID := func(m map[string]any) { asObject(t, "params", m["params"])["id"] = taskID }
	want.state = "canceled"
	res := rpcResult(t, "tasks/cancel", seedDo(t, "POST", endpoint, rewriteSeed(t, "agentos-cancel.json", withID), nil), `"req-125"`)
	checkLegacyTask(t, "tasks/cancel", res, want)
	res = rpcResult(t, "tasks/get", seedDo(t, "POST", endpoint, rewriteSeed(t, "agentos-get.json", withID), nil), `"req-124"`)
	checkLegacyTask(t, "tasks/get after cancel", res, want)
}

// AgentOS "Receiving Tasks" (002): the incoming tasks/send example (nearest
// valid JSON), posted to the root endpoint, runs on the default agent.
func TestSeedAgentOSReceiveExampleOnDefaultEndpoint(t *testing.T) {
	h := echoHarness(t)
	res := rpcResult(t, "tasks/send", seedDo(t, "POST", h.url+"/", readSeed(t, "agentos-receive.json"), nil), `"req-123"`)
	checkLegacyTask(t, "tasks/send", res, legacyWant{
		id:        "task-abc-456",
		sessionID: "session-xyz",
		history:   true,
		state:     "completed",
		message:   seedParams(t, "agentos-receive.json")["message"],
		echoed:    "...",
	})
}

// litellmVariants are a LiteLLM-RS request as serde writes it (params
// null) and with params absent and {}.
func litellmVariants(t *testing.T, name string) []struct {
	name string
	body []byte
} {
	return []struct {
		name string
		body []byte
	}{
		{"params null (as serde writes None)", readSeed(t, name)},
		{"params absent", rewriteSeed(t, name, func(m map[string]any) { delete(m, "params") })},
		{"params {}", rewriteSeed(t, name, func(m map[string]any) { m["params"] = map[string]any{} })},
	}
}

// LiteLLM-RS (003, A2AMethod::Ping): JSON-RPC "ping" with a UUID string id
// and no A2A-Version header answers the result {"status":"online"}.
func TestSeedLiteLLMPingOnline(t *testing.T) {
	h := echoHarness(t)
	for _, v := range litellmVariants(t, "litellm-ping.json") {
		body := v.body
		t.Run(v.name, func(t *testing.T) {
			res := rpcResult(t, "ping", seedDo(t, "POST", h.url+"/agents/echo", body, nil), `"3f6c1d2a-8b4e-4f7a-9c21-5d0e7b9a1c34"`)
			if !reflect.DeepEqual(res, map[string]any{"status": "online"}) {
				t.Fatalf(`ping result = %v, want {"status":"online"}`, res)
			}
		})
	}
}

// LiteLLM-RS (003, A2AMethod::AgentCapabilities): JSON-RPC
// "agent_capabilities" answers the agent's name, its card's skills as
// capabilities {name: skill id, description}, and its streaming and push
// flags.
func TestSeedLiteLLMAgentCapabilitiesFromCard(t *testing.T) {
	h := echoHarness(t)
	skills := workers.EchoDefinition("echo").Card.Skills
	for _, v := range litellmVariants(t, "litellm-agent-capabilities.json") {
		body := v.body
		t.Run(v.name, func(t *testing.T) {
			res := asObject(t, "result", rpcResult(t, "agent_capabilities", seedDo(t, "POST", h.url+"/agents/echo", body, nil), `"9a7e4b10-2c3d-4e5f-8a6b-7c8d9e0f1a2b"`))
			if res["agent"] != "echo" {
				t.Fatalf("agent = %v, want echo", res["agent"])
			}
			if !asBool(t, "streaming", res["streaming"]) || asBool(t, "pushNotifications", res["pushNotifications"]) {
				t.Fatalf("streaming %v, pushNotifications %v; want true, false", res["streaming"], res["pushNotifications"])
			}
			caps := asArray(t, "capabilities", res["capabilities"])
			if len(caps) != len(skills) {
				t.Fatalf("%d capabilities, want one per skill (%d): %v", len(caps), len(skills), caps)
			}
			for i, c := range caps {
				cm := asObject(t, fmt.Sprintf("capabilities[%d]", i), c)
				if cm["name"] != skills[i].ID || cm["description"] != skills[i].Description {
					t.Fatalf("capabilities[%d] = %v, want name %q description %q", i, cm, skills[i].ID, skills[i].Description)
				}
			}
		})
	}
}

// The OpenFang task checker accepts the response the document prints (000,
// "Response (completed task)"), so what the tests above demand is what
// OpenFang's clients read.
func TestSeedOpenFangCheckerAcceptsDocumentedResponse(t *testing.T) {
	checkOpenFangTask(t, "the documented response", readSeed(t, "openfang-send-response.json"), openFangWant{
		id:        "550e8400-e29b-41d4-a716-446655440000",
		sessionID: "optional-session-id",
		status:    "completed",
		message:   seedParams(t, "openfang-send.json")["message"],
	})
}
