package schemas

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// fill sets every exported field reachable from v to a non-zero value:
// slices of two, maps with a nested object and array, pointers to filled
// values. A field added to the record later is filled too, so Clone is
// held to it without this test changing.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"o": map[string]any{"a": []any{"v", 1.0}}}))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// shared reports the first slice, map or pointer a and b share, by path.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if p := shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := shared(a.MapIndex(k), b.MapIndex(k), fmt.Sprintf("%s[%v]", path, k)); p != "" {
				return p
			}
		}
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if p := shared(a.Field(i), b.Field(i), path+"."+f.Name); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestCloneSharesNothing(t *testing.T) {
	var rec TaskRecord
	fill(reflect.ValueOf(&rec).Elem())
	c := rec.Clone()
	if !reflect.DeepEqual(&rec, c) {
		t.Fatalf("the clone differs from the record:\n%+v\n%+v", rec, *c)
	}
	if p := shared(reflect.ValueOf(&rec).Elem(), reflect.ValueOf(c).Elem(), "record"); p != "" {
		t.Fatalf("the clone shares %s with the record", p)
	}
	// The checker itself finds what a shallow copy shares.
	shallow := rec
	if p := shared(reflect.ValueOf(&rec).Elem(), reflect.ValueOf(&shallow).Elem(), "record"); p == "" {
		t.Fatal("a shallow copy shares nothing by the checker: it checks nothing")
	}
}

// A record's writes change the clone they are folded into, never the
// record it was cloned from.
func TestCloneTakesWritesAlone(t *testing.T) {
	rec := &TaskRecord{Task: Task{ID: "t", Status: TaskStatus{State: TaskStateInputRequired},
		History:   make([]Message, 1, 8), // room to append in place, were the array shared
		Artifacts: []Artifact{{ArtifactID: "a", Parts: make([]Part, 1, 8), Metadata: map[string]any{"k": "v"}}},
		Metadata:  map[string]any{"k": map[string]any{"n": 1.0}}}}
	rec.Task.History[0] = Message{MessageID: "m1", Role: RoleUser, Parts: []Part{TextPart("hello")}}
	rec.Task.Artifacts[0].Parts[0] = TextPart("one")
	before := rec.Clone()
	c := rec.Clone()
	if err := c.ApplyContinue(&Message{MessageID: "m2", Role: RoleUser, Parts: []Part{TextPart("again")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyStatus(&TaskStatusUpdateEvent{Status: TaskStatus{State: TaskStateWorking}, Metadata: map[string]any{"s": "set"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyArtifact(&TaskArtifactUpdateEvent{Artifact: Artifact{ArtifactID: "a", Parts: []Part{TextPart("two")}, Metadata: map[string]any{"k": "w"}}, Append: true}); err != nil {
		t.Fatal(err)
	}
	*c.Task.History[0].Parts[0].Text = "changed in place"
	c.Task.Metadata["k"].(map[string]any)["n"] = 2.0
	if !reflect.DeepEqual(rec, before) {
		t.Fatalf("writes to the clone changed the record:\n%+v\nwant\n%+v", rec, before)
	}
}

// Metadata an agent wrote as Go values of its own reads from a clone as
// from the stored record: as decoded JSON.
func TestCloneReadsMetadataAsStored(t *testing.T) {
	type score struct {
		N int `json:"n"`
	}
	rec := &TaskRecord{Task: Task{ID: "t", Metadata: map[string]any{
		"count": 3, "score": score{N: 2}, "list": []string{"a"}, "nested": map[string]any{"n": int64(1)}, "s": "x", "f": 1.5, "b": true, "nil": nil,
	}}}
	stored, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var decoded TaskRecord
	if err := json.Unmarshal(stored, &decoded); err != nil {
		t.Fatal(err)
	}
	if c := rec.Clone(); !reflect.DeepEqual(c.Task.Metadata, decoded.Task.Metadata) {
		t.Fatalf("the clone's metadata %#v, the stored record's %#v", c.Task.Metadata, decoded.Task.Metadata)
	}
}
