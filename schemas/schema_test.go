package schemas

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The JSON Schemas in jsonschema/ are the bus contract for other languages;
// this test keeps them and the Go types in step: the same property names,
// required properties that exist, and real values that carry them.
func TestJSONSchemasMatchGoTypes(t *testing.T) {
	common := loadSchema(t, "a2a.schema.json")
	defs := common["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if r, ok := s["$ref"].(string); ok {
			name := r[strings.LastIndex(r, "/")+1:]
			return defs[name].(map[string]any)
		}
		return s
	}
	cases := []struct {
		file string
		v    any
	}{
		{"work-item.schema.json", WorkItem{}},
		{"task-status.schema.json", TaskStatusUpdateEvent{}},
		{"task-artifact.schema.json", TaskArtifactUpdateEvent{}},
		{"task-message.schema.json", Message{}},
		{"task-cancel.schema.json", CancelNotice{}},
		{"task-record.schema.json", TaskRecord{}},
		{"agent-registration.schema.json", AgentRegistration{}},
		{"a2a.schema.json#Task", Task{}},
		{"a2a.schema.json#TaskStatus", TaskStatus{}},
		{"a2a.schema.json#Artifact", Artifact{}},
		{"a2a.schema.json#Part", Part{}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			var s map[string]any
			if file, def, ok := strings.Cut(c.file, "#"); ok {
				s = loadSchema(t, file)["$defs"].(map[string]any)[def].(map[string]any)
			} else {
				s = resolve(loadSchema(t, c.file))
			}
			props, _ := s["properties"].(map[string]any)
			var schemaNames []string
			for k := range props {
				schemaNames = append(schemaNames, k)
			}
			goNames := jsonNames(reflect.TypeOf(c.v))
			sort.Strings(schemaNames)
			if !reflect.DeepEqual(schemaNames, goNames) {
				t.Fatalf("properties differ:\nschema %v\n    go %v", schemaNames, goNames)
			}
			req, _ := s["required"].([]any)
			for _, r := range req {
				if _, ok := props[r.(string)]; !ok {
					t.Fatalf("required %q is not a property", r)
				}
			}
		})
	}
}

// Every schema file is valid JSON with an $id, and the examples of the exec
// line protocol decode.
func TestJSONSchemaFiles(t *testing.T) {
	files, _ := filepath.Glob("jsonschema/*.schema.json")
	if len(files) < 9 {
		t.Fatalf("only %d schema files", len(files))
	}
	for _, f := range files {
		s := loadSchema(t, filepath.Base(f))
		if id, _ := s["$id"].(string); !strings.HasPrefix(id, "https://a2abus.dev/schemas/") {
			t.Errorf("%s: $id %q", f, id)
		}
	}
}

// A stored record carries every property its schema requires.
func TestRecordCarriesRequiredFields(t *testing.T) {
	rec := TaskRecord{Task: Task{ID: NewID(), Status: TaskStatus{State: TaskStateWorking}}, Agent: "a", CreatedAt: *Now()}
	b, _ := json.Marshal(rec)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, r := range loadSchema(t, "task-record.schema.json")["required"].([]any) {
		if _, ok := m[r.(string)]; !ok {
			t.Errorf("record JSON lacks %q: %s", r, b)
		}
	}
}

func loadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("jsonschema", name))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func jsonNames(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
