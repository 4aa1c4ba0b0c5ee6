package bus

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// trickyStrings are the kinds of text a record's strings may hold: what
// JSON escapes, what encoding/json escapes for HTML, the separators it
// escapes, invalid UTF-8 and runes of every width.
var trickyStrings = []string{
	"", "plain", "<b>&amp;</b>", `quote" back\slash /`, "ctl\x00\x01\b\f\n\r\t\x1f\x7f",
	"sep\u2028 and \u2029", "bad\xff\xfe utf-8 \xe2\x82", "é 漢字 🙂", strings.Repeat("long text ", 40),
}

// trickyData are parts' data: JSON with spaces and HTML characters, as
// encoding/json compacts and escapes it.
var trickyData = []string{`{"a": 1, "b": [true, null, "<x>&"]}`, ` "s" `, `[ ]`, `3.25`, `{"nested":{"k":"\u2028"}}`}

func randJSONValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(7); {
	case n == 0 || depth > 2:
		return trickyStrings[r.IntN(len(trickyStrings))]
	case n == 1:
		return r.Float64() * 1e6
	case n == 2:
		return r.IntN(2) == 0
	case n == 3:
		return nil
	case n == 4:
		return []any{randJSONValue(r, depth+1), randJSONValue(r, depth+1)}
	case n == 5:
		return r.IntN(1000) // a Go value of an agent's, not a decoded one
	default:
		return map[string]any{trickyStrings[r.IntN(len(trickyStrings))]: randJSONValue(r, depth+1), "k": randJSONValue(r, depth+1)}
	}
}

// randFill sets what v holds at random: each field zero, empty or set,
// lists nil, empty or of a few, strings of trickyStrings. It walks every
// exported field, so a field added to a record type is filled too.
func randFill(r *rand.Rand, v reflect.Value, depth int) {
	switch {
	case v.Type() == reflect.TypeFor[schemas.Timestamp]():
		zone := time.FixedZone("z", (r.IntN(48)-24)*1800)
		v.Set(reflect.ValueOf(schemas.Timestamp{Time: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zone)}))
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		if r.IntN(3) > 0 {
			v.SetBytes([]byte(trickyData[r.IntN(len(trickyData))]))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(trickyStrings[r.IntN(len(trickyStrings))])
	case reflect.Int, reflect.Int64:
		if r.IntN(3) > 0 {
			v.SetInt(r.Int64N(1<<40) - 1<<39)
		}
	case reflect.Uint64:
		if r.IntN(3) > 0 {
			v.SetUint(r.Uint64())
		}
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Pointer:
		if r.IntN(3) > 0 && depth < 6 {
			p := reflect.New(v.Type().Elem())
			randFill(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		switch n := r.IntN(4); {
		case n == 0 || depth >= 6:
		case n == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range s.Len() {
				randFill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch r.IntN(3) {
		case 0:
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			m := reflect.MakeMap(v.Type())
			for range 1 + r.IntN(3) {
				m.SetMapIndex(reflect.ValueOf(trickyStrings[r.IntN(len(trickyStrings))]), reflect.ValueOf(randJSONValue(r, 0)))
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				randFill(r, v.Field(i), depth+1)
			}
		}
	}
}

// encodeRecord writes exactly what json.Marshal writes, for records with
// any field set, empty or missing.
func TestEncodeRecordIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var rec schemas.TaskRecord
		randFill(r, reflect.ValueOf(&rec).Elem(), 0)
		want, wantErr := json.Marshal(&rec)
		got, err := encodeRecord(&rec)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("record %d: error %v, json.Marshal's %v", i, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Fatalf("record %d differs at byte %d:\n got %s\nwant %s", i, at, got[max(0, at-80):min(len(got), at+80)], want[max(0, at-80):min(len(want), at+80)])
		}
	}
}

// encodeData writes what json.Marshal writes for the data of every event
// a task stores (status, artifact, reply) and of a work item, with any
// field set, empty or missing, and falls back to encoding/json for
// anything else.
func TestEncodeDataIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(v any) any {
		randFill(r, reflect.ValueOf(v).Elem(), 0)
		return v
	}
	for i := range 4000 {
		var v any
		switch i % 4 {
		case 0:
			v = fill(&schemas.TaskStatusUpdateEvent{})
		case 1:
			v = fill(&schemas.TaskArtifactUpdateEvent{})
		case 2:
			v = fill(&schemas.Message{})
		default:
			// A work item's record is one encodeRecord wrote.
			item := fill(&schemas.WorkItem{}).(*schemas.WorkItem)
			if item.Record != nil {
				var rec schemas.TaskRecord
				randFill(r, reflect.ValueOf(&rec).Elem(), 0)
				if enc, err := encodeRecord(&rec); err == nil {
					item.Record = enc
				}
			}
			v = ownWorkItem{item}
		}
		want, wantErr := json.Marshal(v)
		if w, ok := v.(ownWorkItem); ok {
			want, wantErr = json.Marshal(w.WorkItem)
		}
		got, err := encodeData(v)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%T %d: error %v, json.Marshal's %v", v, i, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("%T %d differs:\n got %s\nwant %s", v, i, got, want)
		}
	}
	for _, v := range []any{(*schemas.TaskStatusUpdateEvent)(nil), (*schemas.Message)(nil), schemas.PushWake{TaskID: "t<1>"}, nil} {
		want, _ := json.Marshal(v)
		if got, err := encodeData(v); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%T: %s %v, want %s", v, got, err, want)
		}
	}
}

func BenchmarkEncodeData(b *testing.B) {
	rec := newRecord("echo")
	val, err := encodeRecord(rec)
	if err != nil {
		b.Fatal(err)
	}
	art := &schemas.TaskArtifactUpdateEvent{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Artifact: schemas.Artifact{ArtifactID: "echo", Parts: rec.Task.History[0].Parts}, LastChunk: true}
	item := ownWorkItem{&schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: "echo", Message: rec.Task.History[0], TaskRevision: 7, Record: val}}
	for _, c := range []struct {
		name string
		v    any
	}{{"artifact", art}, {"workItem", item}} {
		b.Run(c.name+"/encodeData", func(b *testing.B) {
			for b.Loop() {
				_, _ = encodeData(c.v)
			}
		})
		v := c.v
		if w, ok := v.(ownWorkItem); ok {
			v = w.WorkItem
		}
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			for b.Loop() {
				_, _ = json.Marshal(v)
			}
		})
	}
}

// A metadata value encoding/json cannot write fails the encoding as it
// fails json.Marshal.
func TestEncodeRecordRefusesWhatMarshalRefuses(t *testing.T) {
	rec := newRecord("echo")
	rec.Task.History[0].Metadata = map[string]any{"f": func() {}}
	if _, err := encodeRecord(rec); err == nil {
		t.Fatal("a function in metadata was encoded")
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	rec := newRecord("echo")
	for i := range 99 {
		m := *agentMsg("turn " + strings.Repeat("x", i%7) + " of the conversation and then? (after turn x of the conversation)")
		m.ContextID, m.TaskID = rec.Task.ContextID, rec.Task.ID
		rec.Task.History = append(rec.Task.History, m)
	}
	b.Run("encodeRecord", func(b *testing.B) {
		for b.Loop() {
			_, _ = encodeRecord(rec)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(rec)
		}
	})
}
