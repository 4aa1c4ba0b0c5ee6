package discovery

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// The caller's context ends a stream's request until the stream's last
// event; from then on only the stream does (finish detaches it), so a
// caller done with the stream as soon as it has that event does not cut
// the read of the answer's end that keeps the connection.
func TestStreamRequestOutlivesItsCallerOnlyAfterTheLastEvent(t *testing.T) {
	c := &conn{ep: Endpoint{URL: "http://127.0.0.1:1", Version: "1.0"}}
	open := func() (context.CancelFunc, *http.Request, *Stream, *io.PipeWriter) {
		ctx, cancel := context.WithCancel(context.Background())
		req, sc, err := c.streamRequest(ctx, http.MethodPost, c.ep.URL, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		return cancel, req, c.sseStream(req, &http.Response{Body: pr}, sc, nil), pw
	}

	// Before the last event the caller's end ends the request.
	cancel, req, s, _ := open()
	cancel()
	<-req.Context().Done()
	_ = s.Close()

	// After it, the caller's end does not (finish detaches the request
	// before it reads on: AfterFunc's stop); the stream ends the request
	// once it has read the end of the answer.
	cancel, req, s, pw := open()
	detached, detach := false, s.detach
	s.detach = func() { detached = true; detach() }
	s.finish()
	if !detached {
		t.Fatal("finish read the end of the answer still under the caller's context")
	}
	cancel()
	if err := req.Context().Err(); err != nil {
		t.Fatalf("the caller's end ended the request after the last event: %v", err)
	}
	_, _ = pw.Write([]byte("0\r\n"))
	_ = pw.Close()
	<-req.Context().Done()
}
