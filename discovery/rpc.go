package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/a2abus/a2abus/schemas"
)

// The JSON-RPC 2.0 envelope, which three wire forms share (1.0 JSON-RPC,
// 0.3, and the older dialect): a request posted to the endpoint's URL, a
// response holding a result or an error, and streams whose events are
// responses. What goes in the params and comes out of the results is each
// adapter's.

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`
}

// rpcResponseInto decodes a JSON-RPC response's result into the value
// Result points at (encoding/json fills a non-nil pointer held in an
// interface) in the same pass as the envelope.
type rpcResponseInto struct {
	Result any        `json:"result"`
	Error  *wireError `json:"error"`
}

func (c *conn) rpcBody(method string, params any) rpcRequest {
	return rpcRequest{JSONRPC: "2.0", ID: c.ids.Add(1), Method: method, Params: params}
}

// rpc makes one unary JSON-RPC call and decodes its result into out.
func (c *conn) rpc(ctx context.Context, method string, params any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, res, body, err := c.exchange(ctx, http.MethodPost, c.ep.URL, c.rpcBody(method, params))
	if err != nil {
		return err
	}
	// One pass straight into out for the common answer; a body that does
	// not decode that way is read again in two steps, to say exactly what
	// is wrong with it.
	fast := rpcResponseInto{Result: out}
	if err := json.Unmarshal(body, &fast); err == nil && fast.Error == nil && bytes.Contains(body, []byte(`"result"`)) {
		return nil
	}
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil || (r.Result == nil && r.Error == nil) {
		return c.notA2A(req, res, body)
	}
	if r.Error != nil {
		return c.protocolError(r.Error, res)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s: result does not decode: %v", method, redactRaw(c.ep.URL), err)
	}
	return nil
}

// rpcStream opens a JSON-RPC stream of method. Each event is a response:
// its error is the agent's, and read makes its result an event. read's
// final (an agent's mark of the last event) ends the stream, as
// the end rule of a send's stream or a subscription's (streamEnd) does.
func (c *conn) rpcStream(ctx context.Context, method string, params any, lastEventID string, subscribe bool,
	read func(result []byte) (ev *schemas.StreamResponse, final bool, err error)) (*Stream, error) {
	ends := streamEnd(subscribe)
	req, sc, err := c.streamRequest(ctx, http.MethodPost, c.ep.URL, c.rpcBody(method, params), lastEventID)
	if err != nil {
		return nil, err
	}
	decode := func(data []byte) (*schemas.StreamResponse, bool, error) {
		result, err := c.rpcEvent(data)
		if err != nil {
			return nil, false, err
		}
		ev, final, err := read(result)
		if err != nil {
			return nil, false, err
		}
		return ev, ends(ev) || final, nil
	}
	return c.openStream(req, sc, decode)
}

// rpcEvent reads one stream event of a JSON-RPC stream: a response whose
// result is the event, or whose error is the agent's.
func (c *conn) rpcEvent(data []byte) (json.RawMessage, error) {
	var r rpcResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event is not a JSON-RPC response: %v", err)
	}
	if r.Error != nil {
		return nil, c.protocolError(r.Error, nil)
	}
	return r.Result, nil
}
