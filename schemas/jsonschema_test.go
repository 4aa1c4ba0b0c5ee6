package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The bus contract test, part two (schema_test.go is part one). It reads
// jsonschema/ the way a validator in another language would (every file
// registered under its $id, $ref resolved against the referring file's $id),
// walks each Go type and its schema side by side, and validates JSON that
// the Go code produces against the schemas with a small validator for the
// subset of draft 2020-12 the files use. A keyword the validator does not
// know fails the test, so nothing in a schema is silently unchecked.

const bcDraft = "https://json-schema.org/draft/2020-12/schema"

// bcBusShapes maps each bus data shape to its schema file, its Go type and
// the name (CloudEvent type, KV bucket) its title must mention.
var bcBusShapes = []struct {
	file  string
	typ   reflect.Type
	names []string
}{
	{"work-item.schema.json", reflect.TypeFor[WorkItem](), []string{TypeWorkExecute, SubjectWork("<agent>")}},
	{"task-status.schema.json", reflect.TypeFor[TaskStatusUpdateEvent](), []string{TypeTaskStatus, SubjectEvents("<taskId>")}},
	{"task-artifact.schema.json", reflect.TypeFor[TaskArtifactUpdateEvent](), []string{TypeTaskArtifact, SubjectEvents("<taskId>")}},
	{"task-message.schema.json", reflect.TypeFor[Message](), []string{TypeTaskMessage}},
	{"task-cancel.schema.json", reflect.TypeFor[CancelNotice](), []string{TypeTaskCancel, SubjectCancel("<agent>")}},
	{"task-record.schema.json", reflect.TypeFor[TaskRecord](), []string{BucketTasks}},
	{"agent-registration.schema.json", reflect.TypeFor[AgentRegistration](), []string{BucketAgents}},
	{"cached-card.schema.json", reflect.TypeFor[CachedCard](), []string{BucketCards}},
	{"push-config-set.schema.json", reflect.TypeFor[PushConfigSet](), []string{BucketPush}},
	{"push-wake.schema.json", reflect.TypeFor[PushWake](), []string{TypePushWake, SubjectNotify("<taskId>"), StreamNotify}},
	{"registry-entry.schema.json", reflect.TypeFor[RegistryEntry](), []string{BucketRegistry}},
}

// bcPartial lists Go types whose schema may name fewer properties than the Go
// type and require fewer than Go always writes. The card in a registration is
// partial by design: the edge fills in name, description, version, input and
// output modes, skills, interfaces and capabilities before serving it.
var bcPartial = map[reflect.Type]string{
	reflect.TypeFor[AgentCard](): "a registration's card is completed by the edge",
}

type bcSchemas struct {
	byID   map[string]map[string]any // $id → document
	byFile map[string]map[string]any // file name → document
}

func bcLoad(t *testing.T) *bcSchemas {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("jsonschema", "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	s := &bcSchemas{byID: map[string]map[string]any{}, byFile: map[string]map[string]any{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s is not valid JSON: %v", f, err)
		}
		id, _ := doc["$id"].(string)
		if _, dup := s.byID[id]; dup {
			t.Fatalf("%s: $id %q used twice", f, id)
		}
		s.byID[id] = doc
		s.byFile[filepath.Base(f)] = doc
	}
	return s
}

// resolve follows a $ref written in the document with id base and returns
// the target and the id of the document it is in.
func (s *bcSchemas) resolve(base, ref string) (any, string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return nil, "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return nil, "", err
	}
	abs := b.ResolveReference(r)
	frag := abs.Fragment
	abs.Fragment = ""
	docID := abs.String()
	doc, ok := s.byID[docID]
	if !ok {
		return nil, "", fmt.Errorf("$ref %q: no schema with $id %q", ref, docID)
	}
	var node any = doc
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return nil, "", fmt.Errorf("$ref %q: only JSON-pointer fragments are supported", ref)
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := node.(map[string]any)
			if !ok {
				return nil, "", fmt.Errorf("$ref %q: %q is not in an object", ref, tok)
			}
			if node, ok = m[tok]; !ok {
				return nil, "", fmt.Errorf("$ref %q: no %q", ref, tok)
			}
		}
	}
	return node, docID, nil
}

// deref follows $ref chains of a schema that has nothing but a $ref (and
// annotations), so properties can be read from the target.
func (s *bcSchemas) deref(t *testing.T, node map[string]any, base string) (map[string]any, string) {
	t.Helper()
	for range 8 {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node, base
		}
		target, id, err := s.resolve(base, ref)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := target.(map[string]any)
		if !ok {
			t.Fatalf("$ref %q is not an object schema", ref)
		}
		node, base = m, id
	}
	t.Fatalf("$ref chain too long")
	return nil, ""
}

// Keywords the validator below applies, and annotations it may ignore.
var (
	bcApplied = []string{
		"$ref", "type", "enum", "const", "properties", "required", "additionalProperties",
		"items", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
		"minimum", "maximum", "oneOf", "anyOf", "allOf", "not", "if", "then", "else",
	}
	bcAnnotations = []string{
		"$schema", "$id", "$defs", "$comment", "title", "description", "examples",
		"default", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
	}
)

// subschemas calls fn for every schema directly inside node (not through $ref).
func bcSubschemas(node map[string]any, fn func(path string, sub any)) {
	for _, k := range []string{"properties", "$defs"} {
		if m, ok := node[k].(map[string]any); ok {
			for name, sub := range m {
				fn(k+"/"+name, sub)
			}
		}
	}
	for _, k := range []string{"items", "not", "if", "then", "else", "additionalProperties"} {
		if sub, ok := node[k]; ok {
			if _, isBool := sub.(bool); !isBool {
				fn(k, sub)
			}
		}
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		if l, ok := node[k].([]any); ok {
			for i, sub := range l {
				fn(fmt.Sprintf("%s/%d", k, i), sub)
			}
		}
	}
}

// Every file is a draft 2020-12 schema with a unique a2abus $id, every $ref
// resolves, and every keyword is one the validator applies or an annotation.
func TestBusContractSchemaFilesWellFormed(t *testing.T) {
	s := bcLoad(t)
	for file, doc := range s.byFile {
		t.Run(file, func(t *testing.T) {
			if doc["$schema"] != bcDraft {
				t.Errorf("$schema %v, want %s", doc["$schema"], bcDraft)
			}
			id, _ := doc["$id"].(string)
			want := "https://a2abus.dev/schemas/" + strings.TrimSuffix(file, ".schema.json") + ".v1.json"
			if id != want {
				t.Errorf("$id %q, want %q", id, want)
			}
			var walk func(path string, n any)
			walk = func(path string, n any) {
				node, ok := n.(map[string]any)
				if !ok {
					if _, isBool := n.(bool); !isBool {
						t.Errorf("%s: schema is %T", path, n)
					}
					return
				}
				for k := range node {
					if !slices.Contains(bcApplied, k) && !slices.Contains(bcAnnotations, k) {
						t.Errorf("%s: keyword %q is not checked by this test; teach the validator", path, k)
					}
				}
				if ref, ok := node["$ref"].(string); ok {
					if _, _, err := s.resolve(id, ref); err != nil {
						t.Errorf("%s: %v", path, err)
					}
				}
				if p, ok := node["pattern"].(string); ok {
					if _, err := regexp.Compile(p); err != nil {
						t.Errorf("%s: pattern: %v", path, err)
					}
				}
				if req, ok := node["required"].([]any); ok {
					props, _ := node["properties"].(map[string]any)
					for _, r := range req {
						// Required names must be declared, except in the
						// oneOf/anyOf branches that pick from the parent's.
						if _, ok := props[r.(string)]; !ok && props != nil {
							t.Errorf("%s: required %q is not a property", path, r)
						}
					}
				}
				bcSubschemas(node, func(p string, sub any) { walk(path+"/"+p, sub) })
			}
			walk("#", doc)
		})
	}
}

// The titles name the CloudEvent type, subject or bucket of each shape, as
// names.go spells them, and every bus shape has a file.
func TestBusContractTitlesUseNames(t *testing.T) {
	s := bcLoad(t)
	for _, c := range bcBusShapes {
		doc, ok := s.byFile[c.file]
		if !ok {
			t.Errorf("%s missing", c.file)
			continue
		}
		title, _ := doc["title"].(string)
		for _, n := range c.names {
			if !strings.Contains(title, n) {
				t.Errorf("%s: title %q does not name %q", c.file, title, n)
			}
		}
	}
}

// The enums of the common definitions are exactly the Go constants.
func TestBusContractEnums(t *testing.T) {
	s := bcLoad(t)
	defs := s.byFile["a2a.schema.json"]["$defs"].(map[string]any)
	for name, want := range map[string][]string{
		"TaskState": {
			string(TaskStateUnspecified), string(TaskStateSubmitted), string(TaskStateWorking),
			string(TaskStateCompleted), string(TaskStateFailed), string(TaskStateCanceled),
			string(TaskStateInputRequired), string(TaskStateRejected), string(TaskStateAuthRequired),
		},
		"Role": {string(RoleUnspecified), string(RoleUser), string(RoleAgent)},
	} {
		var got []string
		for _, v := range defs[name].(map[string]any)["enum"].([]any) {
			got = append(got, v.(string))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s enum %v, Go constants %v", name, got, want)
		}
	}
	rec := s.byFile["task-record.schema.json"]["properties"].(map[string]any)["dialect"].(map[string]any)
	if !slices.Contains(rec["enum"].([]any), any(DialectLegacy)) {
		t.Errorf("task-record dialect enum %v lacks %q", rec["enum"], DialectLegacy)
	}
}

// bcField is one JSON field of a Go struct; omitempty says Go may leave
// it out (omitempty or omitzero).
type bcField struct {
	typ       reflect.Type
	omitempty bool
}

func bcFields(typ reflect.Type) map[string]bcField {
	out := map[string]bcField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		out[name] = bcField{typ: f.Type, omitempty: slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")}
	}
	return out
}

// bcStructOf returns the struct a field type carries (through pointers and
// slices), or nil. Timestamp and json.RawMessage are leaves.
func bcStructOf(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer || (typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8) {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[Timestamp]() {
		return nil
	}
	return typ
}

// bcTypeFits reports whether a schema "type" value accepts what Go writes for
// a field of type typ.
func bcTypeFits(schemaType any, typ reflect.Type) bool {
	var types []string
	switch v := schemaType.(type) {
	case string:
		types = []string{v}
	case []any:
		for _, x := range v {
			types = append(types, x.(string))
		}
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var want string
	switch {
	case typ == reflect.TypeFor[Timestamp]():
		want = "string"
	case typ == reflect.TypeFor[json.RawMessage]():
		return true
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		want = "string"
	case typ.Kind() == reflect.Slice:
		want = "array"
	case typ.Kind() == reflect.Map, typ.Kind() == reflect.Struct:
		want = "object"
	case typ.Kind() == reflect.String:
		want = "string"
	case typ.Kind() == reflect.Bool:
		want = "boolean"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		return slices.Contains(types, "integer") || slices.Contains(types, "number")
	case typ.Kind() == reflect.Interface:
		return true
	}
	return slices.Contains(types, want)
}

// Each Go type and its schema, walked together from every bus shape down
// through $ref: the same property names, required = the fields Go always
// writes (no omitempty), and property types that fit the Go field types.
func TestBusContractGoTypesMatchSchemas(t *testing.T) {
	s := bcLoad(t)
	seen := map[reflect.Type]bool{}
	var check func(t *testing.T, typ reflect.Type, node map[string]any, base string)
	check = func(t *testing.T, typ reflect.Type, node map[string]any, base string) {
		node, base = s.deref(t, node, base)
		if seen[typ] {
			return
		}
		seen[typ] = true
		_, partial := bcPartial[typ]
		fields := bcFields(typ)
		props, _ := node["properties"].(map[string]any)
		if props == nil {
			t.Errorf("%s: schema has no properties", typ.Name())
			return
		}
		for name := range fields {
			if _, ok := props[name]; !ok {
				if partial {
					t.Logf("%s: schema does not describe %q (%s)", typ.Name(), name, bcPartial[typ])
				} else {
					t.Errorf("%s: field %q missing from the schema", typ.Name(), name)
				}
			}
		}
		for name := range props {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s: schema property %q is not a field of the Go type", typ.Name(), name)
			}
		}
		required := map[string]bool{}
		if req, ok := node["required"].([]any); ok {
			for _, r := range req {
				required[r.(string)] = true
			}
		}
		for name := range required {
			f, ok := fields[name]
			switch {
			case !ok:
				t.Errorf("%s: required %q is not a field of the Go type", typ.Name(), name)
			case f.omitempty:
				t.Errorf("%s: required %q is omitempty in Go: Go may leave it out", typ.Name(), name)
			}
		}
		for name, f := range fields {
			if !f.omitempty && !required[name] && !partial {
				t.Errorf("%s: Go always writes %q but the schema does not require it", typ.Name(), name)
			}
		}
		for name, f := range fields {
			raw, ok := props[name].(map[string]any)
			if !ok {
				continue
			}
			if st, ok := raw["type"]; ok && !bcTypeFits(st, f.typ) {
				t.Errorf("%s.%s: schema type %v does not fit Go type %s", typ.Name(), name, st, f.typ)
			}
			sub := bcStructOf(f.typ)
			if sub == nil {
				continue
			}
			// Structs are described by an object schema or a $ref to one;
			// slices of structs by items.
			if f.typ.Kind() == reflect.Slice || (f.typ.Kind() == reflect.Pointer && f.typ.Elem().Kind() == reflect.Slice) {
				items, ok := raw["items"].(map[string]any)
				if !ok {
					t.Errorf("%s.%s: array of %s without items", typ.Name(), name, sub.Name())
					continue
				}
				raw = items
			}
			check(t, sub, raw, base)
		}
	}
	for _, c := range bcBusShapes {
		t.Run(c.file, func(t *testing.T) {
			doc := s.byFile[c.file]
			check(t, c.typ, doc, doc["$id"].(string))
		})
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Message](), reflect.TypeFor[Part](), reflect.TypeFor[Task](),
		reflect.TypeFor[TaskStatus](), reflect.TypeFor[Artifact](), reflect.TypeFor[AgentCard](),
	} {
		if !seen[typ] {
			t.Errorf("%s is not reached from any bus shape", typ.Name())
		}
	}
}

// bcValidate checks an instance against a schema; it returns the violations.
func (s *bcSchemas) validate(n any, base string, inst any, path string) []string {
	switch n := n.(type) {
	case bool:
		if !n {
			return []string{path + ": false schema"}
		}
		return nil
	case map[string]any:
		return s.validateNode(n, base, inst, path)
	}
	return []string{fmt.Sprintf("%s: schema is %T", path, n)}
}

func bcTypeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

var bcUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *bcSchemas) validateNode(n map[string]any, base string, inst any, path string) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	if ref, ok := n["$ref"].(string); ok {
		target, id, err := s.resolve(base, ref)
		if err != nil {
			return []string{path + ": " + err.Error()}
		}
		errs = append(errs, s.validate(target, id, inst, path)...)
	}
	if st, ok := n["type"]; ok {
		var types []string
		switch v := st.(type) {
		case string:
			types = []string{v}
		case []any:
			for _, x := range v {
				types = append(types, x.(string))
			}
		}
		got := bcTypeOf(inst)
		if !slices.Contains(types, got) && !(got == "integer" && slices.Contains(types, "number")) {
			fail("type %s, want %v", got, types)
			return errs
		}
	}
	if e, ok := n["enum"].([]any); ok && !slices.ContainsFunc(e, func(v any) bool { return reflect.DeepEqual(v, inst) }) {
		fail("%v not in enum %v", inst, e)
	}
	if c, ok := n["const"]; ok && !reflect.DeepEqual(c, inst) {
		fail("%v is not %v", inst, c)
	}
	if str, ok := inst.(string); ok {
		if v, ok := n["minLength"].(float64); ok && float64(len([]rune(str))) < v {
			fail("shorter than %v", v)
		}
		if v, ok := n["maxLength"].(float64); ok && float64(len([]rune(str))) > v {
			fail("longer than %v", v)
		}
		if p, ok := n["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			fail("%q does not match %s", str, p)
		}
		if f, _ := n["format"].(string); f == "uuid" && !bcUUID.MatchString(str) {
			fail("%q is not a uuid", str)
		}
	}
	if num, ok := inst.(float64); ok {
		if v, ok := n["minimum"].(float64); ok && num < v {
			fail("%v < %v", num, v)
		}
		if v, ok := n["maximum"].(float64); ok && num > v {
			fail("%v > %v", num, v)
		}
	}
	if obj, ok := inst.(map[string]any); ok {
		props, _ := n["properties"].(map[string]any)
		if req, ok := n["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					fail("required %q missing", r)
				}
			}
		}
		for k, v := range obj {
			if sub, ok := props[k]; ok {
				errs = append(errs, s.validate(sub, base, v, path+"/"+k)...)
			} else if ap, ok := n["additionalProperties"]; ok {
				errs = append(errs, s.validate(ap, base, v, path+"/"+k)...)
			}
		}
	}
	if arr, ok := inst.([]any); ok {
		if v, ok := n["minItems"].(float64); ok && float64(len(arr)) < v {
			fail("fewer than %v items", v)
		}
		if v, ok := n["maxItems"].(float64); ok && float64(len(arr)) > v {
			fail("more than %v items", v)
		}
		if items, ok := n["items"]; ok {
			for i, v := range arr {
				errs = append(errs, s.validate(items, base, v, fmt.Sprintf("%s/%d", path, i))...)
			}
		}
	}
	if l, ok := n["allOf"].([]any); ok {
		for _, sub := range l {
			errs = append(errs, s.validate(sub, base, inst, path)...)
		}
	}
	count := func(l []any) int {
		c := 0
		for _, sub := range l {
			if len(s.validate(sub, base, inst, path)) == 0 {
				c++
			}
		}
		return c
	}
	if l, ok := n["oneOf"].([]any); ok {
		if c := count(l); c != 1 {
			fail("matches %d of the oneOf branches, want exactly 1", c)
		}
	}
	if l, ok := n["anyOf"].([]any); ok && count(l) == 0 {
		fail("matches none of the anyOf branches")
	}
	if sub, ok := n["not"]; ok && len(s.validate(sub, base, inst, path)) == 0 {
		fail("matches the not schema")
	}
	if cond, ok := n["if"]; ok {
		if len(s.validate(cond, base, inst, path)) == 0 {
			if then, ok := n["then"]; ok {
				errs = append(errs, s.validate(then, base, inst, path)...)
			}
		} else if els, ok := n["else"]; ok {
			errs = append(errs, s.validate(els, base, inst, path)...)
		}
	}
	return errs
}

// bcInstance marshals a Go value and decodes it as generic JSON.
func bcInstance(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var inst any
	if err := json.Unmarshal(b, &inst); err != nil {
		t.Fatal(err)
	}
	return inst
}

// Example values of every bus shape, as the Go code produces them: one with
// every optional field set and one with only what is required.
func bcExamples() map[string][]any {
	ts := &Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	taskID, ctxID := "0b0c1d2e-3f40-4152-8364-758697a8b9ca", "ctx-1"
	full := Message{
		MessageID: "m-1", ContextID: ctxID, TaskID: taskID, Role: RoleUser,
		Parts: []Part{
			TextPart("hello"),
			FilePart([]byte{0, 1, 0xff}, "a.bin", "application/octet-stream"),
			URLPart("https://example.com/f.txt", "f.txt", "text/plain"),
			DataPart(map[string]any{"k": []int{1, 2}}),
			{Text: new(string), Metadata: map[string]any{"x": 1.5}},
		},
		Metadata:         map[string]any{"https://ext.example/v1": map[string]any{"on": true}},
		Extensions:       []string{"https://ext.example/v1"},
		ReferenceTaskIDs: []string{"0b0c1d2e-3f40-4152-8364-758697a8b9cb"},
	}
	minimal := Message{MessageID: "m-2", Role: RoleAgent, Parts: []Part{TextPart("ok")}}
	art := Artifact{ArtifactID: "a-1", Name: "report", Description: "the report", Parts: []Part{TextPart("x")},
		Metadata: map[string]any{"n": 1}, Extensions: []string{"https://ext.example/v1"}}
	task := Task{ID: taskID, ContextID: ctxID,
		Status:    TaskStatus{State: TaskStateWorking, Message: &minimal, Timestamp: ts},
		Artifacts: []Artifact{art}, History: []Message{full, minimal}, Metadata: map[string]any{"k": "v"}}
	card := AgentCard{
		Name: "echo", Description: "Echoes", Version: "1.0.0",
		SupportedInterfaces: []AgentInterface{{URL: "https://a2a.example/agents/echo", ProtocolBinding: BindingJSONRPC, ProtocolVersion: ProtocolVersion}},
		Provider:            &AgentProvider{URL: "https://example.com", Organization: "Example"},
		Capabilities:        AgentCapabilities{Streaming: Bool(true), Extensions: []AgentExtension{{URI: "https://ext.example/v1", Required: true}}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []AgentSkill{{ID: "echo", Name: "Echo", Description: "Echoes", Tags: []string{"demo"}, Examples: []string{"hi"}}},
	}
	return map[string][]any{
		"work-item.schema.json": {
			WorkItem{TaskID: taskID, ContextID: ctxID, Agent: "echo", Message: full},
			WorkItem{TaskID: taskID, ContextID: ctxID, Agent: "a", Message: minimal},
		},
		"task-status.schema.json": {
			TaskStatusUpdateEvent{TaskID: taskID, ContextID: ctxID, Status: task.Status, Metadata: map[string]any{"k": "v"}},
			TaskStatusUpdateEvent{TaskID: taskID, ContextID: ctxID, Status: TaskStatus{State: TaskStateCompleted}},
		},
		"task-artifact.schema.json": {
			TaskArtifactUpdateEvent{TaskID: taskID, ContextID: ctxID, Artifact: art, Append: true, LastChunk: true, Metadata: map[string]any{"k": "v"}},
			TaskArtifactUpdateEvent{TaskID: taskID, ContextID: ctxID, Artifact: Artifact{ArtifactID: "a", Parts: []Part{DataPart(1)}}},
		},
		"task-message.schema.json": {full, minimal},
		"task-cancel.schema.json":  {CancelNotice{TaskID: taskID, Agent: "echo"}},
		"task-record.schema.json": {
			TaskRecord{Task: task, Agent: "echo", Reply: &minimal, CreatedAt: *ts, Dialect: DialectLegacy, ClientTaskID: "client-1", LastEventID: "ev-1"},
			TaskRecord{Task: Task{ID: taskID, Status: TaskStatus{State: TaskStateSubmitted}}, Agent: "echo", CreatedAt: *ts},
		},
		"agent-registration.schema.json": {
			AgentRegistration{Agent: "echo", Card: UnionCard(card), Instance: "echo-1", UpdatedAt: *ts},
			// What a worker group with a bare card writes; the edge completes it.
			AgentRegistration{Agent: "greeter", Card: AgentCard{Name: "greeter"}, Instance: "greeter-1", UpdatedAt: *ts},
			AgentRegistration{Agent: "weather", Card: UnionCard(card), Instance: "weather-1", UpdatedAt: *ts,
				Remote: &RemoteAgentStatus{URL: "https://agents.example/weather", Health: HealthDegraded, LastSeen: ts, CheckedAt: ts, LastError: "HTTP 503"}},
		},
		"cached-card.schema.json": {
			CachedCard{URL: "https://agents.example/weather", CardURL: "https://agents.example/weather/.well-known/agent-card.json",
				Card: card, Raw: json.RawMessage(`{"name":"weather"}`), ETag: `"v1"`, FreshUntil: *ts, FetchedAt: *ts, CheckedAt: *ts,
				LastError: "HTTP 503", LastErrorAt: ts},
			CachedCard{URL: "https://agents.example/weather", CardURL: "https://agents.example/weather/.well-known/agent-card.json",
				Card: card, FreshUntil: *ts, FetchedAt: *ts, CheckedAt: *ts},
			CachedCard{URL: "https://agents.example/aleph", CardURL: "https://agents.example/aleph/.well-known/agent-card.json",
				Card: card, FreshUntil: *ts, FetchedAt: *ts, CheckedAt: *ts,
				Capabilities: []Capability{{Name: "summarize", Description: "Summarizes text", Tags: []string{"text"}, Examples: []string{"summarize this"}}, {Name: "translate"}}},
		},
		"push-config-set.schema.json": {
			PushConfigSet{Configs: []PushConfigRecord{
				{Config: TaskPushNotificationConfig{ID: "c1", TaskID: "t1", URL: "https://hooks.example/a2a", Token: "tok",
					Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "secret"}}, Dialect: "1.0", CreatedAt: *ts,
					Delivered: 5<<12 | 2, DeliveredSeq: 42, Failing: &PushFailure{Since: *ts, Attempts: 3, LastError: "the webhook answered 503", DeadLettered: 1}},
				{Config: TaskPushNotificationConfig{ID: "c2", TaskID: "t1", URL: "https://hooks.example/gone"}, Dialect: "0.3", CreatedAt: *ts,
					Disabled: "the webhook answered 410 Gone"},
			}},
			PushConfigSet{Configs: []PushConfigRecord{}},
		},
		"push-wake.schema.json": {PushWake{TaskID: "t1"}},
		"registry-entry.schema.json": {
			RegistryEntry{Agent: "weather", Remote: &RemoteAgentSpec{URL: "https://agents.example/weather", Headers: map[string]string{"X-Team": "a"},
				HeadersFromEnv: map[string]string{"Authorization": "WEATHER_AUTH"}, CheckEvery: "30s", Binding: "JSONRPC", Tags: []string{"weather"}, Push: true},
				Maintenance: "upgrading", UpdatedAt: *ts, UpdatedBy: "ops"},
			RegistryEntry{Agent: "echo", Maintenance: "down for a bit", UpdatedAt: *ts},
		},
	}
}

// JSON the Go code writes validates against the schemas, carries every
// required property, and decodes back to the same JSON.
func TestBusContractGoValuesValidate(t *testing.T) {
	s := bcLoad(t)
	for _, c := range bcBusShapes {
		doc := s.byFile[c.file]
		id := doc["$id"].(string)
		examples := bcExamples()[c.file]
		if len(examples) == 0 {
			t.Errorf("%s: no examples", c.file)
		}
		for i, ex := range examples {
			t.Run(fmt.Sprintf("%s/%d", c.file, i), func(t *testing.T) {
				if reflect.TypeOf(ex) != c.typ {
					t.Fatalf("example is %T, want %s", ex, c.typ)
				}
				inst := bcInstance(t, ex)
				for _, e := range s.validate(doc, id, inst, "#") {
					t.Error(e)
				}
				top, _ := s.deref(t, doc, id)
				obj := inst.(map[string]any)
				for _, r := range top["required"].([]any) {
					if _, ok := obj[r.(string)]; !ok {
						t.Errorf("required %q missing from %v", r, obj)
					}
				}
				// What validates decodes into the Go type and writes the same.
				b, _ := json.Marshal(ex)
				back := reflect.New(c.typ)
				if err := json.Unmarshal(b, back.Interface()); err != nil {
					t.Fatal(err)
				}
				if b2, _ := json.Marshal(back.Elem().Interface()); string(b2) != string(b) {
					t.Errorf("round trip:\n got %s\nwant %s", b2, b)
				}
			})
		}
	}
}

// The schemas refuse what the Go validation refuses, so a worker checking
// its output against them catches the same mistakes.
func TestBusContractSchemasRefuseBadData(t *testing.T) {
	s := bcLoad(t)
	id := func(file string) string { return s.byFile[file]["$id"].(string) }
	msg := `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}`
	cases := []struct {
		name, file, json string
		ok               bool
	}{
		{"valid message", "task-message.schema.json", msg, true},
		{"unknown fields are allowed", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","future":1}],"future":{}}`, true},
		{"no messageId", "task-message.schema.json", `{"role":"ROLE_USER","parts":[{"text":"x"}]}`, false},
		{"empty messageId", "task-message.schema.json", `{"messageId":"","role":"ROLE_USER","parts":[{"text":"x"}]}`, false},
		{"no role", "task-message.schema.json", `{"messageId":"m","parts":[{"text":"x"}]}`, false},
		{"bad role", "task-message.schema.json", `{"messageId":"m","role":"user","parts":[{"text":"x"}]}`, false},
		{"no parts", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER"}`, false},
		{"empty parts", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[]}`, false},
		{"part without content", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"mediaType":"text/plain"}]}`, false},
		{"part with two contents", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"u"}]}`, false},
		{"raw part", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"AAE=","filename":"f"}]}`, true},
		{"data part of any JSON", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"data":[1,"a",null]}]}`, true},
		{"raw is not a string", "task-message.schema.json", `{"messageId":"m","role":"ROLE_USER","parts":[{"raw":[0,1]}]}`, false},
		{"bad state", "task-status.schema.json", `{"taskId":"t","contextId":"c","status":{"state":"DONE"}}`, false},
		{"bad timestamp", "task-status.schema.json", `{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"yesterday"}}`, false},
		{"status without contextId", "task-status.schema.json", `{"taskId":"t","status":{"state":"TASK_STATE_WORKING"}}`, false},
		{"artifact without parts", "task-artifact.schema.json", `{"taskId":"t","contextId":"c","artifact":{"artifactId":"a"}}`, false},
		{"artifact without id", "task-artifact.schema.json", `{"taskId":"t","contextId":"c","artifact":{"parts":[{"text":"x"}]}}`, false},
		{"append must be boolean", "task-artifact.schema.json", `{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]},"append":"yes"}`, false},
		{"work item task id not a uuid", "work-item.schema.json", `{"taskId":"t","contextId":"c","agent":"echo","message":` + msg + `}`, false},
		{"work item bad agent name", "work-item.schema.json", `{"taskId":"0b0c1d2e-3f40-4152-8364-758697a8b9ca","contextId":"c","agent":"Echo Agent","message":` + msg + `}`, false},
		{"work item without message", "work-item.schema.json", `{"taskId":"0b0c1d2e-3f40-4152-8364-758697a8b9ca","contextId":"c","agent":"echo"}`, false},
		{"cancel without agent", "task-cancel.schema.json", `{"taskId":"t"}`, false},
		{"record without createdAt", "task-record.schema.json", `{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"agent":"a"}`, false},
		{"record task without status", "task-record.schema.json", `{"task":{"id":"t"},"agent":"a","createdAt":"2026-01-02T03:04:05.000Z"}`, false},
		{"record unknown dialect", "task-record.schema.json", `{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"agent":"a","createdAt":"2026-01-02T03:04:05.000Z","dialect":"v0"}`, false},
		{"registration without card", "agent-registration.schema.json", `{"agent":"a","instance":"i","updatedAt":"2026-01-02T03:04:05.000Z"}`, false},
		{"registration card without name", "agent-registration.schema.json", `{"agent":"a","card":{},"instance":"i","updatedAt":"2026-01-02T03:04:05.000Z"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var inst any
			if err := json.Unmarshal([]byte(c.json), &inst); err != nil {
				t.Fatal(err)
			}
			errs := s.validate(s.byFile[c.file], id(c.file), inst, "#")
			if c.ok && len(errs) > 0 {
				t.Errorf("refused: %v", errs)
			}
			if !c.ok && len(errs) == 0 {
				t.Errorf("accepted %s", c.json)
			}
		})
	}
}

// The README names every stream, consumer, bucket, subject, CloudEvent type,
// extension and schema file a worker needs, spelled as names.go spells them,
// and maps each event type to its subject and schema in one table row.
func TestBusContractREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("jsonschema", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, name := range []string{
		StreamWork, StreamEvents, StreamDLQ, BucketTasks, BucketAgents,
		ConsumerWork("<agent>"), SubjectWork("<agent>"), SubjectEvents("<taskId>"),
		SubjectCancel("<agent>"), SubjectDLQ("<agent>"),
		"`" + ExtSequence + "`", "`" + ExtSequenceIndex + "`", "`" + ExtTraceparent + "`", "`" + ExtA2AVersion + "`",
		"Nats-Msg-Id", "+WPI", Source("<role>", "<instance>"),
	} {
		if !strings.Contains(readme, name) {
			t.Errorf("README does not mention %s", name)
		}
	}
	rows := map[string][2]string{
		TypeWorkExecute:  {SubjectWork("<agent>"), "work-item.schema.json"},
		TypeTaskStatus:   {SubjectEvents("<taskId>"), "task-status.schema.json"},
		TypeTaskArtifact: {SubjectEvents("<taskId>"), "task-artifact.schema.json"},
		TypeTaskMessage:  {SubjectEvents("<taskId>"), "task-message.schema.json"},
		TypeTaskCancel:   {SubjectCancel("<agent>"), "task-cancel.schema.json"},
	}
	for typ, want := range rows {
		found := false
		for line := range strings.Lines(readme) {
			if strings.Contains(line, "`"+typ+"`") && strings.Contains(line, want[0]) && strings.Contains(line, want[1]) {
				found = true
			}
		}
		if !found {
			t.Errorf("README has no row with %s, %s and %s", typ, want[0], want[1])
		}
	}
	if n := len(SequenceString(1)); !strings.Contains(readme, fmt.Sprint(n)+" digits") {
		t.Errorf("README does not say the sequence has %d digits", n)
	}
}
