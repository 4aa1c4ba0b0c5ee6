package edge

import (
	"context"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// A2A 0.3 over JSON-RPC, on the same URL as 1.0: the method grammar tells
// the versions apart ("message/send" vs "SendMessage"). Every 0.3 call is
// converted to the 1.0 model (schemas/v03.go), served by the same method
// code, and its result converted back, so a task created through one
// version is read, streamed and canceled through the other.

func (s *Server) v03Methods() map[string]methodFunc {
	return map[string]methodFunc{
		"message/send":                       s.v03Send,
		"tasks/get":                          s.v03Get,
		"tasks/cancel":                       s.v03Cancel,
		"agent/getAuthenticatedExtendedCard": s.v03GetExtendedAgentCard,
	}
}

// v03GetExtendedAgentCard answers the extended card as a union card: 0.3
// clients read its 0.3 fields.
func (s *Server) v03GetExtendedAgentCard(ctx context.Context, c *call) (any, error) {
	card, err := s.svc.GetExtendedAgentCard(ctx, c)
	if err != nil {
		return nil, err
	}
	// The service signs the 1.0 card it answers; this answer is another
	// form of it, so it carries a signature of its own.
	signed, err := s.signed(s.card03(*card))
	if err != nil {
		return nil, schemas.Errorf(schemas.ErrInternal, "signing the extended card failed: %v", err)
	}
	return signed, nil
}

func (s *Server) v03StreamMethods() map[string]streamFunc {
	return map[string]streamFunc{
		"message/stream":    s.v03Stream,
		"tasks/resubscribe": s.v03Resubscribe,
	}
}

// isV03Method reports whether a method name has the 0.3 grammar.
func isV03Method(m string) bool { return strings.Contains(m, "/") }

// supportedVersion03 accepts what 0.3 clients send: nothing, or 0.x.
func supportedVersion03(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || strings.HasPrefix(v, "0.3") || strings.HasPrefix(v, "0.2")
}

func (s *Server) v03SendParams(c *call) (*schemas.SendMessageRequest, error) {
	var p schemas.V03MessageSendParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	return p.ToV1()
}

func (s *Server) v03Send(ctx context.Context, c *call) (any, error) {
	req, err := s.v03SendParams(c)
	if err != nil {
		return nil, err
	}
	sent, err := s.svc.SendMessage(ctx, c, req)
	if err != nil {
		return nil, err
	}
	res := sent.resp
	if res.Message != nil {
		return schemas.MessageToV03(*res.Message), nil
	}
	return schemas.TaskToV03(*res.Task), nil
}

func (s *Server) v03Get(ctx context.Context, c *call) (any, error) {
	rec, p, err := s.queryTask(ctx, c)
	if err != nil {
		return nil, err
	}
	return shapeTask(rec, p.HistoryLength), nil
}

func (s *Server) v03Cancel(ctx context.Context, c *call) (any, error) {
	rec, _, err := s.cancelByParams(ctx, c)
	if err != nil {
		return nil, err
	}
	return shapeTask(rec, nil), nil
}

// queryTask reads the params of a tasks/get (0.3 and the older dialect)
// and the task they name by its 0.3 or client id.
func (s *Server) queryTask(ctx context.Context, c *call) (*schemas.TaskRecord, *schemas.V03TaskQueryParams, error) {
	var p schemas.V03TaskQueryParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, nil, err
	}
	c.clientIDs = true
	rec, err := s.svc.GetTask(ctx, c, &schemas.GetTaskRequest{ID: p.ID, HistoryLength: p.HistoryLength})
	return rec, &p, err
}

// cancelByParams cancels the task the params of a tasks/cancel name, and
// returns it with the id it was asked by.
func (s *Server) cancelByParams(ctx context.Context, c *call) (*schemas.TaskRecord, string, error) {
	var p schemas.V03TaskIDParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, "", err
	}
	c.clientIDs = true
	rec, err := s.svc.CancelTask(ctx, c, &schemas.CancelTaskRequest{ID: p.ID})
	return rec, p.ID, err
}

func (s *Server) v03Stream(ctx context.Context, c *call, out streamOut) error {
	req, err := s.v03SendParams(c)
	if err != nil {
		return err
	}
	return s.svc.SendStreamingMessage(ctx, c, req, out)
}

func (s *Server) v03Resubscribe(ctx context.Context, c *call, out streamOut) error {
	var p schemas.V03TaskIDParams
	if err := decodeParams(c.params, &p); err != nil {
		return err
	}
	// tasks/resubscribe is shared with the older dialect: a task created
	// through it is named by its client's id, and streamed in its shapes.
	c.clientIDs = true
	rec, err := s.svc.GetTask(ctx, c, &schemas.GetTaskRequest{ID: p.ID})
	if err != nil {
		return err
	}
	if rec.Dialect == schemas.DialectLegacy {
		c.dialect, c.clientTaskID = rec.Dialect, clientID(rec, p.ID)
	}
	c.clientIDs = false
	return s.svc.SubscribeToTask(ctx, c, &schemas.SubscribeToTaskRequest{ID: rec.Task.ID}, out)
}
