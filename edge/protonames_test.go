package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// A 1.0 request's member names spelt as the proto spells its fields are
// read as their json_names at every depth, but the keys of free-form
// values (metadata, a part's data) are the client's and stay; a field
// given under both names is kept once when the values are the same and
// refused naming it when they differ.
func TestProtoNames(t *testing.T) {
	for _, c := range []struct {
		name, in, want, refused string
	}{
		{"nested, in arrays",
			`{"message":{"message_id":"m","context_id":"c","reference_task_ids":["t"],"parts":[{"text":"x","media_type":"text/plain"}]},"configuration":{"accepted_output_modes":["text/plain"],"history_length":2,"return_immediately":true,"task_push_notification_config":{"task_id":"t","url":"https://h"}}}`,
			`{"message":{"messageId":"m","contextId":"c","referenceTaskIds":["t"],"parts":[{"text":"x","mediaType":"text/plain"}]},"configuration":{"acceptedOutputModes":["text/plain"],"historyLength":2,"returnImmediately":true,"taskPushNotificationConfig":{"taskId":"t","url":"https://h"}}}`, ""},
		{"free-form values kept",
			`{"metadata":{"user_id":"u","nested":{"a_b":1}},"message":{"message_id":"m","parts":[{"data":{"row_count":3}}],"metadata":{"trace_id":"x"}}}`,
			`{"metadata":{"user_id":"u","nested":{"a_b":1}},"message":{"messageId":"m","parts":[{"data":{"row_count":3}}],"metadata":{"trace_id":"x"}}}`, ""},
		{"other names kept", `{"Task_Id":"a","x-y":1,"_z":2,"pageSize":3,"weird\u005fname":4}`, `{"Task_Id":"a","x-y":1,"_z":2,"pageSize":3,"weirdName":4}`, ""},
		{"both names, same value", `{"history_length":2,"historyLength":2,"id":"t"}`, `{"historyLength":2,"id":"t"}`, ""},
		{"both names, different values", `{"id":"t","historyLength":1, "history_length" : 0}`, "", "historyLength"},
		{"both names, nested", `{"configuration":{"return_immediately":true,"returnImmediately":false}}`, "", "configuration.returnImmediately"},
		{"strings and numbers as they are", ` { "page_size" : 1e2 , "page_token" : "a_b\"c" , "x" : [ ] , "y" : { } } `, `{"pageSize":1e2,"pageToken":"a_b\"c","x":[],"y":{}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := protoNames([]byte(c.in))
			if c.refused != "" {
				var e *schemas.Error
				if !errors.As(err, &e) || !errors.Is(err, schemas.ErrInvalidParams) || e.Metadata["field"] != c.refused {
					t.Fatalf("got %s, %v; want ErrInvalidParams naming %s", got, err, c.refused)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("got %s, %v\nwant %s", got, err, c.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// The HTTP+JSON query takes a field's parameter under either name.
func TestProtoQuery(t *testing.T) {
	q, err := protoQuery(url.Values{"page_size": {"2"}, "contextId": {"c"}, "history_length": {"0"}, "tenant": {"t"}})
	if want := (url.Values{"pageSize": {"2"}, "contextId": {"c"}, "historyLength": {"0"}, "tenant": {"t"}}); err != nil || !reflect.DeepEqual(q, want) {
		t.Fatalf("got %v, %v; want %v", q, err, want)
	}
	if _, err := protoQuery(url.Values{"page_size": {"2"}, "pageSize": {"3"}}); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("both names with different values: %v", err)
	}
	if q, err := protoQuery(url.Values{"page_size": {"2"}, "pageSize": {"2"}}); err != nil || q.Get("pageSize") != "2" || len(q) != 1 {
		t.Fatalf("both names with the same value: %v, %v", q, err)
	}
}

// BenchmarkProtoNames is what a SendMessage written in the proto's names
// costs the front door beyond one in json_names (which never calls it).
//
//	go test -run '^$' -bench ProtoNames -benchmem ./edge/
func BenchmarkProtoNames(b *testing.B) {
	params := []byte(`{"message":{"message_id":"m-1","context_id":"c-1","role":"ROLE_USER","parts":[{"text":"hello benchmark"}],"metadata":{"user_id":"u"}},"configuration":{"accepted_output_modes":["text/plain"],"history_length":2}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protoNames(params); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzProtoNames holds protoNames to its contract on any JSON object: the
// answer is JSON, renaming it again changes nothing, and a refusal is
// invalid params naming its field.
func FuzzProtoNames(f *testing.F) {
	for _, s := range []string{
		`{"message":{"message_id":"m","parts":[{"text":"x","media_type":"t"}],"metadata":{"a_b":1}}}`,
		`{"history_length":1,"historyLength":2}`,
		`{"a_":[{"b_c":{"d_e":[1,"x_y",null,true]}}],"data":{"f_g":{}}}`,
		`{"\u0061_b":"\"","":0}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) || !strings.HasPrefix(strings.TrimSpace(in), "{") {
			return
		}
		out, err := protoNames([]byte(in))
		if err != nil {
			wantRow(t, err, schemas.ErrInvalidParams)
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s became %s, not JSON", in, out)
		}
		again, err := protoNames(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("renaming %s again gave %s, %v", out, again, err)
		}
	})
}
