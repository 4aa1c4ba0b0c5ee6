package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// CloudEvents on NATS. a2abus writes binary content mode: every attribute is
// a "ce-<name>" header with a percent-encoded value and the payload is the
// event data (JSON). It reads binary and structured mode: structured iff the
// Content-Type header starts with "application/cloudevents". The CloudEvent
// id doubles as Nats-Msg-Id, so a retried publish is de-duplicated by
// JetStream. The event model and its validation are sdk-go's; only the wire
// mapping onto NATS headers is ours (the sdk's NATS JetStream modules target
// the legacy API or are untagged).
//
// Task events are the one place with batches: the events one KV write
// stores (WORKING with the first artifact, the last artifact with
// COMPLETED) go out as one message in the CloudEvents JSON batch format
// (Content-Type application/cloudevents-batch+json, a JSON array of
// structured events), with the last event's id as Nats-Msg-Id. A JetStream
// publish is the main cost of a transition, so a short task pays one
// instead of three; every event in the batch is still a whole CloudEvent.

const (
	headerPrefix = "ce-"
	contentJSON  = "application/json"
	contentBatch = "application/cloudevents-batch+json"
)

// errMalformedEvent wraps every decode failure, so a consumer can tell poison
// input (terminate) from a transient failure (retry).
var errMalformedEvent = errors.New("malformed cloudevent")

// newEvent builds an event with the bus's source and the given attributes
// and JSON data.
func (b *Bus) newEvent(id, typ, subject string, data any, ext map[string]string) (cloudevents.Event, error) {
	ev := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ev.SetID(id)
	ev.SetType(typ)
	ev.SetSource(b.source)
	ev.SetSubject(subject)
	ev.SetTime(time.Now().UTC())
	for k, v := range ext {
		if v != "" {
			ev.SetExtension(k, v)
		}
	}
	if err := ev.SetData(contentJSON, data); err != nil {
		return ev, fmt.Errorf("bus: encode %s data: %w", typ, err)
	}
	if err := ev.Validate(); err != nil {
		return ev, fmt.Errorf("bus: invalid %s event: %w", typ, err)
	}
	return ev, nil
}

// encodeMsg maps an event onto a NATS message in binary content mode.
func encodeMsg(subject string, ev *cloudevents.Event) *nats.Msg {
	h := make(nats.Header, 10)
	set := func(name, v string) {
		if v != "" {
			h[headerPrefix+name] = []string{percentEncode(v)}
		}
	}
	set("specversion", ev.SpecVersion())
	set("id", ev.ID())
	set("source", ev.Source())
	set("type", ev.Type())
	set("subject", ev.Subject())
	if !ev.Time().IsZero() {
		set("time", ev.Time().UTC().Format(time.RFC3339Nano))
	}
	set("datacontenttype", ev.DataContentType())
	set("dataschema", ev.DataSchema())
	for k, v := range ev.Extensions() {
		set(k, fmt.Sprint(v))
	}
	h[nats.MsgIdHdr] = []string{ev.ID()}
	return &nats.Msg{Subject: subject, Header: h, Data: ev.Data()}
}

// encodeBatch maps several events onto one NATS message in the JSON batch
// format; the last event's id is its Nats-Msg-Id, so a retried write's
// batch (same event ids) is de-duplicated.
func encodeBatch(subject string, evs []cloudevents.Event) (*nats.Msg, error) {
	// sdk-go's writer straight into one buffer: json.Marshal of the slice
	// would re-validate and compact every event's output (a tenth of a
	// short task's CPU).
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range evs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := cloudevents.WriteJson(&evs[i], &buf); err != nil {
			return nil, fmt.Errorf("bus: encode event batch: %w", err)
		}
	}
	buf.WriteByte(']')
	data := buf.Bytes()
	h := nats.Header{
		"Content-Type": []string{contentBatch},
		nats.MsgIdHdr:  []string{evs[len(evs)-1].ID()},
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, nil
}

// decodeMsgs reads the events of a NATS message: a JSON batch, or one event
// in either content mode. A batch is refused whole if any event in it is
// malformed, or if it is empty.
func decodeMsgs(msg *nats.Msg) ([]cloudevents.Event, error) {
	ct := strings.ToLower(headerFold(msg.Header, "Content-Type"))
	if !strings.HasPrefix(ct, contentBatch) {
		ev, err := decodeMsg(msg)
		if err != nil {
			return nil, err
		}
		return []cloudevents.Event{ev}, nil
	}
	var evs []cloudevents.Event
	if err := json.Unmarshal(msg.Data, &evs); err != nil {
		return nil, fmt.Errorf("%w: batch: %v", errMalformedEvent, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: empty batch", errMalformedEvent)
	}
	for i := range evs {
		if evs[i].SpecVersion() != cloudevents.CloudEventsVersionV1 {
			return nil, fmt.Errorf("%w: batch event %d: unsupported specversion %q", errMalformedEvent, i, evs[i].SpecVersion())
		}
		if err := evs[i].Validate(); err != nil {
			return nil, fmt.Errorf("%w: batch event %d: %v", errMalformedEvent, i, err)
		}
		if err := textAttrs(&evs[i]); err != nil {
			return nil, fmt.Errorf("%w: batch event %d: %v", errMalformedEvent, i, err)
		}
	}
	return evs, nil
}

// textAttrs refuses a structured event whose attributes are not text
// (invalid UTF-8, which JSON strings cannot carry but sdk-go's reader
// lets through): the binary mode could not carry them either.
func textAttrs(ev *cloudevents.Event) error {
	for _, v := range []string{ev.ID(), ev.Source(), ev.Type(), ev.Subject(), ev.DataContentType(), ev.DataSchema()} {
		if !utf8.ValidString(v) {
			return errors.New("an attribute is not valid UTF-8")
		}
	}
	for _, v := range ev.Extensions() {
		if s, ok := v.(string); ok && !utf8.ValidString(s) {
			return errors.New("an extension is not valid UTF-8")
		}
	}
	return nil
}

// decodeMsg reads an event from a NATS message in either content mode.
func decodeMsg(msg *nats.Msg) (cloudevents.Event, error) {
	var ev cloudevents.Event
	if strings.HasPrefix(strings.ToLower(headerFold(msg.Header, "Content-Type")), "application/cloudevents") {
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			return ev, fmt.Errorf("%w: structured: %v", errMalformedEvent, err)
		}
		if ev.SpecVersion() != cloudevents.CloudEventsVersionV1 {
			return ev, fmt.Errorf("%w: unsupported specversion %q", errMalformedEvent, ev.SpecVersion())
		}
		if err := textAttrs(&ev); err != nil {
			return ev, fmt.Errorf("%w: structured: %v", errMalformedEvent, err)
		}
	} else {
		ev = cloudevents.New(cloudevents.CloudEventsVersionV1)
		seen := false
		for name, vals := range msg.Header {
			lname := strings.ToLower(name)
			if !strings.HasPrefix(lname, headerPrefix) || len(vals) == 0 {
				continue
			}
			v, err := percentDecode(vals[0])
			if err != nil {
				return ev, fmt.Errorf("%w: header %s: %v", errMalformedEvent, name, err)
			}
			attr := lname[len(headerPrefix):]
			switch attr {
			case "specversion":
				seen = true
				if v != cloudevents.CloudEventsVersionV1 {
					return ev, fmt.Errorf("%w: unsupported specversion %q", errMalformedEvent, v)
				}
			case "id":
				ev.SetID(v)
			case "source":
				ev.SetSource(v)
			case "type":
				ev.SetType(v)
			case "subject":
				ev.SetSubject(v)
			case "time":
				t, err := time.Parse(time.RFC3339Nano, v)
				if err != nil {
					return ev, fmt.Errorf("%w: time %q", errMalformedEvent, v)
				}
				ev.SetTime(t)
			case "datacontenttype":
				ev.SetDataContentType(v)
			case "dataschema":
				ev.SetDataSchema(v)
			default:
				ev.SetExtension(attr, v)
			}
		}
		if !seen {
			return ev, fmt.Errorf("%w: no ce-specversion header and not structured", errMalformedEvent)
		}
		ev.DataEncoded = msg.Data
	}
	if err := ev.Validate(); err != nil {
		return ev, fmt.Errorf("%w: %v", errMalformedEvent, err)
	}
	return ev, nil
}

// headerFold returns the first value of a header whatever the case of its
// name (NATS header lookup is case-sensitive; the binding says names are not).
func headerFold(h nats.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vals := range h {
		if strings.EqualFold(k, name) && len(vals) > 0 {
			return vals[0]
		}
	}
	return ""
}

// decodeData decodes the JSON data of an event into v.
func decodeData(ev *cloudevents.Event, v any) error {
	if err := json.Unmarshal(ev.Data(), v); err != nil {
		return fmt.Errorf("%w: %s data: %v", errMalformedEvent, ev.Type(), err)
	}
	return nil
}

// percentEncode encodes a header value as the NATS binding asks: space,
// '"', '%' and every byte outside U+0021..U+007E become %XX (uppercase hex
// of the UTF-8 bytes).
func percentEncode(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '"' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '"' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// percentDecode undoes percentEncode, accepting lowercase hex and a value
// wrapped in double quotes, and rejects invalid UTF-8.
func percentDecode(s string) (string, error) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if !strings.Contains(s, "%") {
		if !utf8.ValidString(s) {
			return "", errors.New("invalid UTF-8")
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape at %d", i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	if !utf8.Valid(b) {
		return "", errors.New("invalid UTF-8")
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
