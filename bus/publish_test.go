package bus

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// jsRead is how jetstream reads a publish's answer, the reading readPubAck
// must give for every input.
func jsRead(data []byte) (*jetstream.PubAck, *jetstream.APIError, bool) {
	var r struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &r); err != nil || (r.Error == nil && (r.PubAck == nil || r.Stream == "")) {
		return nil, nil, false
	}
	return r.PubAck, r.Error, true
}

func checkPubAck(t *testing.T, data []byte) {
	t.Helper()
	pa, err := readPubAck(data)
	want, apiErr, ok := jsRead(data)
	switch {
	case !ok:
		if !errors.Is(err, jetstream.ErrInvalidJSAck) {
			t.Errorf("%q: %v %v, want ErrInvalidJSAck", data, pa, err)
		}
	case apiErr != nil:
		var got *jetstream.APIError
		if !errors.As(err, &got) || *got != *apiErr {
			t.Errorf("%q: error %v, want %v", data, err, apiErr)
		}
	case err != nil || !reflect.DeepEqual(pa, want):
		t.Errorf("%q: %+v %v, want %+v", data, pa, err, want)
	}
}

// The acknowledgement read by hand is the one encoding/json reads, for
// the forms nats-server writes and for anything else.
func TestReadPubAck(t *testing.T) {
	for _, s := range []string{
		`{"stream":"KV_a2a-tasks","seq":42}`,
		`{"stream":"A2A_WORK","domain":"hub","seq":7}`,
		`{"stream":"A2A_INTAKE","seq":9,"duplicate": true}`,
		`{"stream":"A2A_INTAKE","seq":9,"duplicate":true}`,
		`{"stream":"S","seq":18446744073709551615}`,
		`{"stream":"S","seq":18446744073709551616}`,
		`{"stream":"S","seq":1,"val":"3"}`,
		`{"stream":"S","seq":1,"batch":"b","count":2}`,
		`{"stream":"S\u0041","seq":1}`,
		`{"stream":"","seq":1}`,
		`{"stream":"S","seq":}`,
		`{"stream":"S","seq":1} `,
		`{"stream":"S","seq":01}`,
		`{"stream":"S","seq":-1}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"KV_a2a-tasks","seq":0}`,
		`{"error":{"code":503,"description":"JetStream system temporarily unavailable"}}`,
		`{"type":"io.nats.jetstream.api.v1.pub_ack","stream":"S","seq":5}`,
		``, `{}`, `null`, `{"stream":"S"`, `not json`,
	} {
		checkPubAck(t, []byte(s))
	}
}

func FuzzReadPubAck(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":42}`, `{"stream":"S","domain":"d","seq":7,"duplicate": true}`, `{"error":{"code":400,"err_code":10071,"description":"x"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkPubAck(t, data) })
}

// Against a real stream: an acknowledgement, a repeat, a failed
// compare-and-swap as the error jetstream gives, and no stream at all.
func TestPublishAnswers(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	m := nats.NewMsg(kvPrefix(schemas.BucketTasks) + "p1")
	m.Data = []byte(`{}`)
	expectLastSubjectSeq(m, 0)
	pa, err := b.publish(ctx, m)
	if err != nil || pa.Sequence == 0 || pa.Stream != kvStream(schemas.BucketTasks) || pa.Duplicate {
		t.Fatalf("first write: %+v %v", pa, err)
	}
	_, err = b.publish(ctx, m) // the same expectation again: the key has a value now
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("a lost compare-and-swap: %v", err)
	}
	d := nats.NewMsg(schemas.SubjectEvents("p1"))
	d.Header.Set(nats.MsgIdHdr, "p1-once")
	first, err := b.publish(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.publish(ctx, d)
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("a repeat: %+v %v, want the first's sequence %d as a duplicate", again, err, first.Sequence)
	}
	if _, err := b.publish(ctx, nats.NewMsg("no.stream.takes.this")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("a subject no stream takes: %v", err)
	}
}
