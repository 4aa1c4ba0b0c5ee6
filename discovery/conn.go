package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// conn is one endpoint's HTTP, shared by every wire form the client may
// speak there: the guarded HTTP client, the headers and credentials every
// request carries, the time and size bounds, and the JSON-RPC ids (one
// sequence, whichever dialect sends them). Every request of every adapter
// goes through it, so the guards, credentials and limits apply alike, and
// every answer that is not A2A, or carries an agent's error, is read into
// the same errors.
type conn struct {
	ep   Endpoint
	http *http.Client
	opts Options
	ids  atomic.Int64
	// grpc is a gRPC endpoint's connection (grpc.go), nil for the others.
	grpc *grpcConn
}

// wireError is a JSON-RPC error object, or the body of google.rpc.Status;
// schemas decodes it into the one error table.
type wireError = schemas.WireError

func (c *conn) newRequest(ctx context.Context, method, u string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("discovery: encoding request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", UserAgent)
	// 1.0 names its version in a header; 0.3 and the older dialect (the
	// only ones an endpoint of theirs is spoken in) have none.
	if isV1(c.ep.Version) {
		req.Header.Set(schemas.HeaderA2AVersion, schemas.ProtocolVersion)
	}
	return req, nil
}

// exchange sends one request with a JSON body (nil: none) asking for JSON,
// and reads the whole answer within the client's size bound; ctx carries
// the call's timeout. Every unary call of every binding and dialect goes
// through it, so the guards, credentials and limits apply alike.
func (c *conn) exchange(ctx context.Context, method, u string, body any) (*http.Request, *http.Response, []byte, error) {
	req, err := c.newRequest(ctx, method, u, body)
	if err != nil {
		return nil, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer drain(res.Body)
	b, err := c.readBody(req, res)
	if err != nil {
		return nil, nil, nil, err
	}
	return req, res, b, nil
}

// do sends req with the client's credentials. An answer of HTTP 401 or
// 403 is returned as an *AuthError; a 401 to a request whose credential
// the Credentials can refresh (Refresher) is first sent once more with a
// fresh one.
func (c *conn) do(req *http.Request) (*http.Response, error) {
	res, sent, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if rf, ok := c.opts.Credentials.(Refresher); ok && res.StatusCode == http.StatusUnauthorized && (req.Body == nil || req.GetBody != nil) && rf.Invalidate(sent) {
		drain(res.Body)
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("discovery: %w", err)
			}
		}
		if res, _, err = c.send(again); err != nil {
			return nil, err
		}
	}
	if ae := Refusal(req.URL.String(), res, c.opts.Security); ae != nil {
		drain(res.Body)
		return nil, ae
	}
	return res, nil
}

// send sends a copy of req with the client's credentials applied (req
// itself stays as it was, for a retry and for messages: an API key may go
// in the query), and returns the answer and the request as sent.
func (c *conn) send(req *http.Request) (*http.Response, *http.Request, error) {
	out := req
	if c.opts.Credentials != nil {
		out = req.Clone(req.Context())
		if err := c.opts.Credentials.Apply(req.Context(), out, c.opts.Security); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, nil, err
		}
	}
	res, err := c.http.Do(out)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, nil, &TransportError{URL: redact(req.URL), Err: fmt.Errorf("no answer: %w", ctxErr)}
		}
		return nil, nil, &TransportError{URL: redact(req.URL), Err: unwrapURLError(err)}
	}
	return res, out, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *conn) readBody(req *http.Request, res *http.Response) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(res.Body, c.opts.MaxResponseBytes+1))
	if err != nil {
		return nil, &TransportError{URL: redact(req.URL), Status: res.StatusCode, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if int64(len(b)) > c.opts.MaxResponseBytes {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "answer from %s is larger than %d bytes", redact(req.URL), c.opts.MaxResponseBytes)
	}
	return b, nil
}

// statusError reads a non-2xx HTTP answer: a google.rpc.Status body
// becomes its table error; anything else a transport error.
func (c *conn) statusError(req *http.Request, res *http.Response, body []byte) error {
	var st struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &st) == nil && st.Error != nil && (st.Error.Message != "" || st.Error.Status != "") {
		if st.Error.Code == 0 {
			st.Error.Code = res.StatusCode
		}
		return c.protocolError(st.Error, res)
	}
	return c.notA2A(req, res, body)
}

// notA2A describes an answer that is not an A2A response: usually a proxy
// error page, a wrong URL or an overloaded agent.
func (c *conn) notA2A(req *http.Request, res *http.Response, body []byte) error {
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return &TransportError{URL: redact(req.URL), Status: res.StatusCode, RetryAfter: retryAfter(res),
		Err: fmt.Errorf("answer is not an A2A response (HTTP %d %s): %q", res.StatusCode, http.StatusText(res.StatusCode), snippet)}
}

// protocolError turns a wire error into an occurrence of our table (see
// schemas.WireError.Decode), with the answer's Retry-After; an
// authentication refusal (an agent may answer -31401 or -31403 with HTTP
// 200) comes back as an *AuthError, as an HTTP 401 or 403 does.
func (c *conn) protocolError(w *wireError, res *http.Response) error {
	e := w.Decode(int(retryAfter(res) / time.Second))
	if errors.Is(e, schemas.ErrUnauthenticated) || errors.Is(e, schemas.ErrPermissionDenied) {
		return newAuthError(c.ep.URL, e.HTTPStatus, res, c.opts.Security, e)
	}
	return e
}

// retryAfter reads Retry-After: delay-seconds, or an HTTP date (rounded
// to whole seconds, at least one).
func retryAfter(res *http.Response) time.Duration {
	if res == nil {
		return 0
	}
	h := strings.TrimSpace(res.Header.Get("Retry-After"))
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t).Round(time.Second), time.Second)
	}
	return 0
}

func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
	_ = r.Close()
}

// TransportError is a failure to reach an agent, or an answer that is not
// A2A at all (an HTML error page, a wrong URL).
type TransportError struct {
	URL        string
	Status     int           // HTTP status, 0 when there was no answer (or it broke off)
	RetryAfter time.Duration // from Retry-After, when the agent sent one
	Err        error
}

func (e *TransportError) Error() string { return "calling " + e.URL + ": " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth retrying later: the agent was
// unreachable, overloaded (HTTP 429/502/503/504) or said UNAVAILABLE. A
// refusal by the SSRF guard, or a call the caller canceled, is not.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrForbiddenAddress) || errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		switch te.Status {
		case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, schemas.ErrUnavailable)
}
