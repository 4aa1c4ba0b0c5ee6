package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publish stores m in the stream that takes its subject and returns the
// stream's acknowledgement. It is the bus's one synchronous JetStream
// publish and does what jetstream's PublishMsg does — a moment's retries
// while no stream answers (a leader being elected), the same errors
// (*jetstream.APIError wrapped as "nats: …", jetstream.ErrNoStreamResponse,
// jetstream.ErrInvalidJSAck), an attempt bounded where ctx is not — but
// reads the acknowledgement without reflection: every task waits on
// several, and encoding/json's decode of them was ~2% of a blocking task's
// CPU. Expectations and TTLs are m's headers (expectLastSubjectSeq,
// withTTL).
func (b *Bus) publish(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, attemptLimit)
		defer cancel()
	}
	resp, err := b.nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		select {
		case <-ctx.Done():
		case <-time.After(jetstream.DefaultPubRetryWait):
		}
		resp, err = b.nc.RequestMsgWithContext(ctx, m)
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, jetstream.ErrNoStreamResponse
		}
		return nil, err
	}
	return readPubAck(resp.Data)
}

// expectLastSubjectSeq makes m's publish a compare-and-swap: stored only if
// the last message on m's subject has sequence seq (0: there is none).
func expectLastSubjectSeq(m *nats.Msg, seq uint64) {
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
}

// withTTL makes the message m stores expire ttl after it is stored (no
// TTL when ttl is not positive).
func withTTL(m *nats.Msg, ttl time.Duration) {
	if ttl > 0 {
		m.Header.Set(jetstream.MsgTTLHeader, ttl.String())
	}
}

// readPubAck reads a stream's answer to a publish. nats-server writes a
// success as {"stream":NAME,["domain":D,]"seq":N[,"duplicate": true]};
// that form is read by hand, and anything else (an error, a field a later
// server adds) by encoding/json, as jetstream reads them all.
func readPubAck(data []byte) (*jetstream.PubAck, error) {
	if pa, ok := scanPubAck(data); ok {
		return pa, nil
	}
	var r struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return nil, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return r.PubAck, nil
}

// scanPubAck reads the success form of readPubAck; ok is false for any
// other text, which readPubAck then decodes in full.
func scanPubAck(data []byte) (*jetstream.PubAck, bool) {
	var pa jetstream.PubAck
	rest, ok := bytes.CutPrefix(data, []byte(`{"stream":`))
	if !ok {
		return nil, false
	}
	if pa.Stream, rest, ok = scanPlainString(rest); !ok || pa.Stream == "" {
		return nil, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"domain":`)); found {
		if pa.Domain, rest, ok = scanPlainString(r); !ok {
			return nil, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`)); !ok {
		return nil, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if n == 0 || err != nil || (n > 1 && rest[0] == '0') {
		return nil, false
	}
	pa.Sequence, rest = seq, rest[n:]
	for _, dup := range [...]string{`,"duplicate": true`, `,"duplicate":true`} {
		if r, found := bytes.CutPrefix(rest, []byte(dup)); found {
			pa.Duplicate, rest = true, r
			break
		}
	}
	if string(rest) != "}" {
		return nil, false
	}
	return &pa, true
}

// scanPlainString reads a JSON string without escapes at the start of b
// and returns it and what follows; ok is false for anything else.
func scanPlainString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 {
		return "", nil, false
	}
	v := b[1 : 1+end]
	for _, c := range v {
		if c == '\\' || c < 0x20 {
			return "", nil, false
		}
	}
	return string(v), b[2+end:], true
}
