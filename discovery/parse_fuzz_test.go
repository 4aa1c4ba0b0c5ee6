package discovery

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// Fuzzers of what discovery reads from agents: their cards and their SSE
// streams. Seeds are below, the card fixtures of testdata/seeds, and
// testdata/fuzz; `go test` runs them, .ci/run fuzzes each for a while.

// FuzzParseCard reads agent cards of any shape. A card is refused as
// ErrInvalidCard, or read as a card whose interfaces a client can dial; a
// card read, encoded and read again is the same card.
func FuzzParseCard(f *testing.F) {
	for _, name := range []string{"agentos-card.json", "openfang-card.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"name":"a","description":"d","version":"1","capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"s","description":"d","tags":["t"]}],"supportedInterfaces":[{"url":"https://a.example/","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"https://a.example/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0","tenant":"t"}]}`,
		`{"name":"a","description":"d","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[],"url":"http://a.example/a2a","protocolVersion":"0.3.0","preferredTransport":"JSONRPC","additionalInterfaces":[{"url":"http://a.example/v1","transport":"HTTP+JSON"}]}`,
		`{"name":"legacy","description":"d","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[],"url":"http://a.example/a2a"}`,
		`{"name":"a","description":"d","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":null,"url":"ftp://a.example"}`,
		`{"name":"a","description":"d","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[],"Skills":null,"supportedInterfaces":[{"url":"https://a.example/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`,
		`{"name":""}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCard(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidCard) {
				t.Fatalf("a refusal that is not ErrInvalidCard: %v", err)
			}
			return
		}
		if c.Name == "" || len(c.SupportedInterfaces) == 0 {
			t.Fatalf("read a card without a name or an interface: %+v", c)
		}
		for i, in := range c.SupportedInterfaces {
			u, err := url.Parse(in.URL)
			if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "grpc", "grpcs"}, u.Scheme) || in.ProtocolBinding == "" {
				t.Fatalf("interface %d %+v is not one a client can dial", i, in)
			}
		}
		once, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encoding the card: %v", err)
		}
		c2, err := ParseCard(once)
		if err != nil {
			t.Fatalf("the card read and encoded, %s, is refused: %v", once, err)
		}
		if twice, _ := json.Marshal(c2); !bytes.Equal(once, twice) {
			t.Fatalf("the card changed in a round trip:\n%s\n%s", once, twice)
		}
	})
}

// sseEvent is one event readEvent returns.
type sseEvent struct {
	data  []byte
	id    string
	hasID bool
}

// readSSE reads every event of body with a Stream's reader bounded to max
// bytes, until the end or the first error (nil at the end).
func readSSE(body []byte, max int64) ([]sseEvent, error) {
	s := &Stream{url: "http://agent.example/", rd: bufio.NewReaderSize(bytes.NewReader(body), 16), max: max}
	var evs []sseEvent
	for {
		data, id, hasID, err := s.readEvent()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		if data != nil || hasID {
			evs = append(evs, sseEvent{data: data, id: id, hasID: hasID})
		}
	}
}

// writeSSE writes events as an SSE body: an id line, a data line per line
// of data, a blank line. Lines end in CRLF, so a value ending in CR is
// read back whole.
func writeSSE(evs []sseEvent) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		if ev.hasID {
			b.WriteString("id: " + ev.id + "\r\n")
		}
		if ev.data != nil {
			for _, line := range strings.Split(string(ev.data), "\n") {
				b.WriteString("data: " + line + "\r\n")
			}
		}
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// FuzzSSE reads SSE bodies as a client of an agent's stream does. Reading
// ends at the body's end or with ErrInvalidAgentResponse when a line or an
// event passes the bound; no event is larger than the bound, no id holds
// NUL; the events read, written again, read the same.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"id: 17\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		": keep-alive\n\nid: 31\r\ndata: {\"statusUpdate\":{}}\r\n\r\n",
		"data: a\ndata: b\nid\n\ndata:no space\n\nevent: x\nretry: 5\n\n",
		"id: a\x00b\ndata: x\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
		"data: unterminated",
		"id: \r\r\ndata: \r\n\n",
	} {
		f.Add([]byte(s))
	}
	const max = 256
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := readSSE(body, max)
		if err != nil && !errors.Is(err, schemas.ErrInvalidAgentResponse) {
			t.Fatalf("reading stopped with %T %v", err, err)
		}
		for _, ev := range evs {
			if len(ev.data) > max || strings.IndexByte(ev.id, 0) >= 0 {
				t.Fatalf("read an event past the bound or with NUL in its id: %q (id %q)", ev.data, ev.id)
			}
		}
		// Written again, a line may be a few bytes longer (the space after
		// the colon, CRLF): read with room for that.
		again, err := readSSE(writeSSE(evs), max+8)
		if err != nil {
			t.Fatalf("the events written again do not read: %v", err)
		}
		if len(again) != len(evs) {
			t.Fatalf("%d events read back as %d", len(evs), len(again))
		}
		for i := range evs {
			if !bytes.Equal(evs[i].data, again[i].data) || evs[i].id != again[i].id || evs[i].hasID != again[i].hasID {
				t.Fatalf("event %d changed in a round trip: %+v, %+v", i, evs[i], again[i])
			}
		}
	})
}
