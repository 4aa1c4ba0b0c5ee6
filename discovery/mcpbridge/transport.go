package mcpbridge

import (
	"io"
	"net/http"
	"sync"
)

// HandlerTransport reaches an edge in this process: each request is served
// by h (the edge's handler, its front door included) as if it had come
// over the network from the MCP client that made it — its address is the
// one the bridge's Handler saw — and the answer is streamed back as it is
// written, so a streaming call's events arrive as they happen.
func HandlerTransport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr = r.Header.Get(originHeader)
	r.Header.Del(originHeader)
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0" // the process itself (stdio)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	if r.Host == "" {
		r.Host = r.URL.Host
	}
	r.RequestURI = r.URL.RequestURI()
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			// A handler that panics (net/http's server would log it and
			// drop the connection) ends the answer short.
			if p := recover(); p != nil {
				w.begin(http.StatusInternalServerError)
				_ = pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			w.begin(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.started:
	case <-r.Context().Done():
		_ = pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: r}, nil
}

// pipeWriter is the ResponseWriter of an in-process request: the head is
// handed over at the first write, flush or return, the body streams
// through a pipe the caller reads.
type pipeWriter struct {
	header  http.Header
	sent    http.Header
	status  int
	pw      *io.PipeWriter
	once    sync.Once
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) begin(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) WriteHeader(status int) { w.begin(status) }

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.begin(http.StatusOK)
	return w.pw.Write(b)
}

// Flush hands the head over; the body needs none (a pipe write blocks
// until it is read).
func (w *pipeWriter) Flush() { w.begin(http.StatusOK) }
