package bus

import (
	"encoding/base64"
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
// JetStream. Reading is sdk-go's event model and validation, so any valid
// CloudEvent is read; the mapping onto NATS headers is ours (the sdk's NATS
// JetStream modules target the legacy API or are untagged), and so is the
// writer (outEvent), which writes the few attributes a2abus sets.
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

// outEvent is an event as a2abus writes it: the attributes it sets, and
// its data encoded once. Writing is ours and reading is sdk-go's: every
// task costs a handful of writes, and sdk-go's event model costs an
// extension map, a copy of the data and a validation pass for each (a
// fifth of a short task's worker CPU), where a2abus writes a small fixed
// set of attributes it checks once, in newEvent. What it writes is read
// back by sdk-go's reader in the tests (and by every other reader).
type outEvent struct {
	id, source, typ, subject string
	time                     time.Time
	contentType              string
	dataSchema               string
	ext                      []attr // extension attributes, in the order written
	data                     []byte
	// jsonData says data is one JSON value, written as is in a
	// structured event; other data is written base64-encoded.
	jsonData bool
}

// attr is an extension attribute.
type attr struct{ name, value string }

// newEvent builds an event with the bus's source, the given attributes
// (extensions with an empty value are left out) and data as JSON, and
// checks what the CloudEvents spec asks of it.
func (b *Bus) newEvent(id, typ, subject string, data any, ext ...attr) (outEvent, error) {
	enc, err := encodeData(data)
	if err != nil {
		return outEvent{}, fmt.Errorf("bus: encode %s data: %w", typ, err)
	}
	e := outEvent{id: id, source: b.source, typ: typ, subject: subject, time: time.Now().UTC(), contentType: contentJSON, data: enc, jsonData: true}
	for _, a := range ext {
		if a.value != "" {
			e.ext = append(e.ext, a)
		}
	}
	if err := e.check(); err != nil {
		return e, fmt.Errorf("bus: invalid %s event: %w", typ, err)
	}
	return e, nil
}

// check refuses an event CloudEvents 1.0 does not allow: a required
// attribute missing, an extension name that is not lowercase alphanumeric
// (at most 20 characters), or text that is not UTF-8.
func (e *outEvent) check() error {
	switch {
	case e.id == "":
		return errors.New("id: REQUIRED but empty")
	case e.source == "":
		return errors.New("source: REQUIRED but empty")
	case e.typ == "":
		return errors.New("type: REQUIRED but empty")
	}
	for _, v := range [...]string{e.id, e.source, e.typ, e.subject, e.contentType, e.dataSchema} {
		if !utf8.ValidString(v) {
			return errors.New("an attribute is not valid UTF-8")
		}
	}
	for _, a := range e.ext {
		if !extensionName(a.name) {
			return fmt.Errorf("extension name %q: lowercase letters and digits, at most 20", a.name)
		}
		if !utf8.ValidString(a.value) {
			return fmt.Errorf("extension %s is not valid UTF-8", a.name)
		}
	}
	return nil
}

func extensionName(n string) bool {
	if n == "" || len(n) > 20 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	// The names the attributes of the spec use are not extensions.
	switch n {
	case "specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema", "data", "data_base64":
		return false
	}
	return true
}

// encodeMsg maps an event onto a NATS message in binary content mode.
func encodeMsg(subject string, e *outEvent) *nats.Msg {
	h := make(nats.Header, 9+len(e.ext))
	set := func(name, v string) {
		if v != "" {
			h[headerPrefix+name] = []string{percentEncode(v)}
		}
	}
	set("specversion", cloudevents.CloudEventsVersionV1)
	set("id", e.id)
	set("source", e.source)
	set("type", e.typ)
	set("subject", e.subject)
	if !e.time.IsZero() {
		set("time", e.time.UTC().Format(time.RFC3339Nano))
	}
	set("datacontenttype", e.contentType)
	set("dataschema", e.dataSchema)
	for _, a := range e.ext {
		set(a.name, a.value)
	}
	h[nats.MsgIdHdr] = []string{e.id}
	return &nats.Msg{Subject: subject, Header: h, Data: e.data}
}

// encodeBatch maps several events onto one NATS message in the JSON batch
// format; the last event's id is its Nats-Msg-Id, so a retried write's
// batch (same event ids) is de-duplicated.
func encodeBatch(subject string, evs []outEvent) (*nats.Msg, error) {
	if len(evs) == 0 {
		return nil, errors.New("bus: encode event batch: no events")
	}
	n := 2
	for i := range evs {
		n += structuredSize(&evs[i])
	}
	data := append(make([]byte, 0, n), '[')
	for i := range evs {
		if i > 0 {
			data = append(data, ',')
		}
		data = appendStructured(data, &evs[i])
	}
	data = append(data, ']')
	h := nats.Header{
		"Content-Type": []string{contentBatch},
		nats.MsgIdHdr:  []string{evs[len(evs)-1].id},
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, nil
}

// appendStructured appends e in the CloudEvents JSON format: attributes
// as JSON strings, JSON data as is, other data as data_base64.
func appendStructured(b []byte, e *outEvent) []byte {
	member := func(b []byte, name, v string) []byte {
		if v == "" {
			return b
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		return appendJSONString(b, v)
	}
	b = append(b, `{"specversion":"1.0"`...)
	b = member(b, "id", e.id)
	b = member(b, "source", e.source)
	b = member(b, "type", e.typ)
	b = member(b, "subject", e.subject)
	if !e.time.IsZero() {
		b = append(b, `,"time":"`...)
		b = e.time.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = member(b, "datacontenttype", e.contentType)
	b = member(b, "dataschema", e.dataSchema)
	for _, a := range e.ext {
		b = member(b, a.name, a.value)
	}
	switch {
	case e.data == nil:
	case e.jsonData:
		b = append(b, `,"data":`...)
		b = append(b, e.data...)
	default:
		b = append(b, `,"data_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, e.data)
		b = append(b, '"')
	}
	return append(b, '}')
}

// structuredSize is about what appendStructured writes for e (exact for
// text without escapes), so a batch is written into one buffer.
func structuredSize(e *outEvent) int {
	n := 160 + len(e.id) + len(e.source) + len(e.typ) + len(e.subject) + len(e.contentType) + len(e.dataSchema)
	for _, a := range e.ext {
		n += 6 + len(a.name) + len(a.value)
	}
	if e.jsonData {
		return n + len(e.data)
	}
	return n + base64.StdEncoding.EncodedLen(len(e.data))
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
	if err := readJSON(ev.Data(), v); err != nil {
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

// eventTime is the time of the binary-mode CloudEvent whose headers h
// are (its ce-time), or false when it has none readable: a structured
// event, or one written without a time.
func eventTime(h nats.Header) (time.Time, bool) {
	v, err := percentDecode(h.Get(headerPrefix + "time"))
	if err != nil || v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
