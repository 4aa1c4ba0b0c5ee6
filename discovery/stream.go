package discovery

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/a2abus/a2abus/schemas"
)

// Stream is an open SSE stream of task events from an agent. Next returns
// the events in order and io.EOF when the agent ends the stream; an error
// event the agent sends comes back as its *schemas.Error. Close releases
// the connection; it is safe to call at any time and more than once.
type Stream struct {
	body   io.ReadCloser
	rd     *bufio.Reader
	max    int64
	decode func([]byte) (*schemas.StreamResponse, error)
	lastID string
	err    error
}

func (c *Client) openStream(req *http.Request, decode func([]byte) (*schemas.StreamResponse, error)) (*Stream, error) {
	res, err := c.do(req)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if res.StatusCode/100 != 2 || mt != "text/event-stream" {
		// An error before the stream starts comes as an ordinary answer:
		// JSON-RPC (HTTP 200), google.rpc.Status, or something not A2A.
		defer drain(res.Body)
		body, err := c.readBody(req, res)
		if err != nil {
			return nil, err
		}
		if res.StatusCode/100 != 2 {
			return nil, c.statusError(req, res, body)
		}
		var r rpcResponse
		if err := json.Unmarshal(body, &r); err == nil && r.Error != nil {
			return nil, c.protocolError(r.Error, res)
		}
		return nil, c.notA2A(req, res, body)
	}
	return &Stream{body: res.Body, rd: bufio.NewReaderSize(res.Body, 16<<10), max: c.opts.MaxResponseBytes, decode: decode}, nil
}

// Next returns the next event.
func (s *Stream) Next() (*schemas.StreamResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	for {
		data, id, err := s.readEvent()
		if err != nil {
			s.err = err
			return nil, err
		}
		if data == nil {
			continue // a comment or keep-alive only
		}
		if id != "" {
			s.lastID = id
		}
		ev, err := s.decode(data)
		if err != nil {
			s.err = err
			return nil, err
		}
		return ev, nil
	}
}

// LastEventID is the SSE id of the last event returned: pass it to
// SubscribeToTask to resume after it.
func (s *Stream) LastEventID() string { return s.lastID }

// Close ends the stream.
func (s *Stream) Close() error {
	if s.err == nil {
		s.err = errors.New("discovery: stream closed")
	}
	return s.body.Close()
}

// readEvent reads one SSE event (lines up to a blank line): its joined
// data lines and its id. It returns nil data for an event with none.
func (s *Stream) readEvent() (data []byte, id string, err error) {
	var buf bytes.Buffer
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && hasData {
				return buf.Bytes(), id, nil // the last event, unterminated
			}
			return nil, "", err
		}
		if len(line) == 0 {
			if hasData {
				return buf.Bytes(), id, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				buf.WriteByte('\n')
			}
			hasData = true
			buf.Write(value)
			if int64(buf.Len()) > s.max {
				return nil, "", schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event larger than %d bytes", s.max)
			}
		case "id":
			id = string(value)
		}
	}
}

// readLine reads a line without its end (LF, CRLF or CR-less), bounded.
func (s *Stream) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.rd.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > s.max {
			return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream line larger than %d bytes", s.max)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			break
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("discovery: reading stream: %w", err)
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
