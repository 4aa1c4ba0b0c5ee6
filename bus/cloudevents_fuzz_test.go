package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/a2abus/a2abus/schemas"
)

// FuzzDecodeMsgs reads NATS messages as CloudEvents in every mode the bus
// takes (binary ce-* headers, structured JSON, JSON batch). A message is
// refused as malformed (errMalformedEvent, which consumers terminate) or
// read as valid CloudEvents 1.0 events; read events written again the
// bus's way (binary, or a batch) read back the same. The input is the
// headers as "Name: value" lines (as testdata/ce/binary.headers) and the
// payload.
func FuzzDecodeMsgs(f *testing.F) {
	binary := strings.Join([]string{
		"ce-specversion: 1.0", "Ce-Id: 9b2e4c1a", `ce-source: "urn:a2abus:worker:py-2"`, "CE-TYPE: dev.a2abus.task.status.v1",
		"ce-subject: 0b6f2a52", "ce-time: 2030-01-02T03:04:05.5Z", "ce-datacontenttype: application/json",
		"ce-sequence: 00000000000000000007", "ce-note: caf%c3%a9%20%22au%20lait%22%20100%25",
	}, "\n")
	structured := `{"specversion":"1.0","id":"3f0c","source":"urn:a2abus:edge:py-1","type":"dev.a2abus.work.execute.v1","subject":"t","time":"2030-01-02T03:04:05.123Z","datacontenttype":"application/json","dataschema":"https://a2abus.dev/schemas/work-item.json","sequence":"00000000000000000042","data":{"taskId":"t"}}`
	for _, seed := range []struct{ headers, data string }{
		{binary, `{"taskId":"t","status":{"state":"TASK_STATE_WORKING"}}`},
		{binary + "\nce-time: yesterday", `{}`},
		{binary + "\nce-id: %zz", `{}`},
		{"ce-specversion: 0.3\nce-id: x\nce-source: s\nce-type: t", ``},
		{"Content-Type: application/cloudevents+json", structured},
		{"Content-Type: application/cloudevents+json; charset=utf-8", `{"specversion":"1.0","id":"x","source":"s","type":"t","data_base64":"AAE="}`},
		{"Content-Type: application/cloudevents-batch+json", "[" + structured + "," + structured + "]"},
		{"Content-Type: application/cloudevents-batch+json", `[]`},
		{"Content-Type: application/cloudevents-batch+json", `[{"specversion":"1.0","id":"x","source":"s","type":"t","ext":7,"flag":true}]`},
		{"Content-Type: application/json", `{"specversion":"1.0","id":"x","source":"s","type":"t"}`},
		{"Content-Type: application/cloudevents-batch+json", `[{"specversion":"1.0","id":"a","source":"s","type":"dev.a2abus.task.status.v1","datacontenttype":"application/json","sequence":"00000000000000000003","data":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}},{"specversion":"1.0","id":"b","source":"s","type":"dev.a2abus.task.artifact.v1","sequence":3,"sequenceindex":1,"data":{"taskId":"t","artifact":{"artifactId":"x","parts":[{"text":"hi"}]},"append":true}}]`},
	} {
		f.Add(seed.headers, []byte(seed.data))
	}
	f.Fuzz(func(t *testing.T, headers string, data []byte) {
		h := nats.Header{}
		for _, line := range strings.Split(headers, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				h[k] = append(h[k], v)
			}
		}
		msg := &nats.Msg{Subject: "a2a.events.t", Header: h, Data: data}
		// Where the general reading reads a batch of task events, the
		// direct one (decodeBatchUpdates) reads the same, or leaves it to
		// the general one. (It folds the case of attribute names, as
		// encoding/json does; the general one does not.)
		if fast := decodeBatchUpdates(msg); fast != nil {
			if evs, err := decodeMsgs(msg); err == nil {
				for i := range evs {
					if u, err := decodeUpdate(&evs[i]); err == nil && (len(evs) != len(fast) || !reflect.DeepEqual(u, fast[i])) {
						t.Fatalf("event %d read directly as %+v, generally %+v", i, fast[i], u)
					}
				}
			}
		}
		evs, err := decodeMsgs(msg)
		if err != nil {
			if !errors.Is(err, errMalformedEvent) {
				t.Fatalf("a refusal that is not errMalformedEvent: %v", err)
			}
			return
		}
		for i := range evs {
			if evs[i].SpecVersion() != cloudevents.CloudEventsVersionV1 || evs[i].Validate() != nil {
				t.Fatalf("event %d read is not a valid CloudEvents 1.0 event: %v", i, evs[i].Validate())
			}
		}
		var again *nats.Msg
		if len(evs) == 1 && !strings.HasPrefix(strings.ToLower(headerFold(h, "Content-Type")), contentBatch) {
			again = encodeMsg(msg.Subject, ptr(outEventOf(&evs[0])))
		} else if again, err = encodeBatch(msg.Subject, outEventsOf(evs)); err != nil {
			t.Fatalf("writing the batch read: %v", err)
		}
		evs2, err := decodeMsgs(again)
		if err != nil {
			t.Fatalf("the events written again do not read: %v", err)
		}
		if len(evs2) != len(evs) {
			t.Fatalf("%d events read back as %d", len(evs), len(evs2))
		}
		for i := range evs {
			if a, b := eventAttrs(&evs[i]), eventAttrs(&evs2[i]); !maps.Equal(a, b) {
				t.Fatalf("event %d changed in a round trip:\n%v\n%v", i, a, b)
			}
		}
	})
}

// eventAttrs is what an event says, as strings: its context attributes,
// its extensions (as written on the wire) and its data. An extension with
// an empty value is left out: the binary writer writes no empty header
// (encodeMsg), so such an extension, which only a structured event from
// elsewhere can carry, does not survive being written again.
func eventAttrs(ev *cloudevents.Event) map[string]string {
	out := map[string]string{
		"id": ev.ID(), "source": ev.Source(), "type": ev.Type(), "subject": ev.Subject(),
		"datacontenttype": ev.DataContentType(), "dataschema": ev.DataSchema(), "data": string(ev.Data()),
	}
	if !ev.Time().IsZero() {
		out["time"] = ev.Time().UTC().String()
	}
	for k, v := range ev.Extensions() {
		if s := fmt.Sprint(v); s != "" {
			out["ext:"+k] = s
		}
	}
	return out
}

func outEventsOf(evs []cloudevents.Event) []outEvent {
	out := make([]outEvent, len(evs))
	for i := range evs {
		out[i] = outEventOf(&evs[i])
	}
	return out
}

// appendJSONString writes what encoding/json reads back as the string
// json.Marshal would have written (invalid UTF-8 as U+FFFD).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x1f\n\r\t\x7f", "ünï\u2028<&>", "bad \xff\xfe end", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString([]byte("x"), s)[1:]
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: not JSON: %v", s, out, err)
		}
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		if got != want {
			t.Fatalf("appendJSONString(%q) reads as %q, encoding/json's as %q", s, got, want)
		}
	})
}

// The index header written by hand reads back as the entry it was
// written from, as encoding/json's encoding of it does.
func FuzzAppendIndexEntry(f *testing.F) {
	f.Add("TASK_STATE_WORKING", int64(1795506624831000000), "echo", "alice", "", "ctx-1", "127.0.0.1", false, false)
	f.Add("", int64(-1), "", "o\"\\", "t\xff", "", "\u2028", true, true)
	f.Fuzz(func(t *testing.T, state string, at int64, agent, owner, tenant, context, origin string, reply, push bool) {
		e := schemas.TaskIndexEntry{State: schemas.TaskState(state), At: at, Agent: agent, Owner: owner, Tenant: tenant, Context: context, Origin: origin, Reply: reply, Push: push}
		var got, want schemas.TaskIndexEntry
		if err := json.Unmarshal(appendIndexEntry(nil, e), &got); err != nil {
			t.Fatalf("%+v written as %s: %v", e, appendIndexEntry(nil, e), err)
		}
		std, _ := json.Marshal(e)
		_ = json.Unmarshal(std, &want)
		if got != want {
			t.Fatalf("%+v reads back as %+v, encoding/json's as %+v", e, got, want)
		}
	})
}
