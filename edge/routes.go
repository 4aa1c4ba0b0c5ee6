package edge

import (
	"net/http"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// The route table. Every path the edge serves is added by handle, the only
// code that writes to the mux, and is listed in Routes with the door it
// enters by. Two rules hold for every route because handle applies them,
// not because each route remembers to:
//
//   - A request that may change state (any method but GET, HEAD and
//     OPTIONS) from a browser page of another origin is refused. Browsers
//     mark such requests (Sec-Fetch-Site, Origin), and a page can send
//     them to a loopback edge without reading the answer: a form POST, a
//     no-cors fetch. Clients that are not browsers send neither header
//     and pass.
//   - Such a request whose body is not JSON is refused: a form or a
//     no-cors fetch cannot send a JSON media type, and a body without a
//     media type is not taken as JSON.
//
// A2A calls enter by the front door (serve), which applies both with the
// rest of its pipeline and answers in the call's binding; every other
// route (cards, registry admin, webhooks, health, metrics, MCP) is a side
// door that handle wraps in sideDoor, answering in plain text.

// Route is one entry of the edge's route table.
type Route struct {
	// Pattern is the net/http.ServeMux pattern ("POST /agents/{agent}").
	Pattern string
	// FrontDoor is true for A2A calls, which pass serve's whole pipeline
	// (authentication, rate, bounds, tenant, lifecycle).
	FrontDoor bool
}

// Routes returns the edge's route table, in the order routes were added.
func (s *Server) Routes() []Route { return append([]Route(nil), s.table...) }

// frontDoorHandler is what serve returns: a handler that applies the
// route rules itself, in its binding's error form.
type frontDoorHandler http.HandlerFunc

func (h frontDoorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h(w, r) }

// handle adds a route. Any handler but the front door's is a side door.
func (s *Server) handle(pattern string, h http.Handler) {
	_, front := h.(frontDoorHandler)
	if !front {
		h = s.sideDoor(h)
	}
	s.table = append(s.table, Route{Pattern: pattern, FrontDoor: front})
	s.mux.Handle(pattern, h)
}

// sideDoor applies the route rules to a route that is not an A2A call.
func (s *Server) sideDoor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.checkRoute(r); e != nil {
			status := e.HTTPStatus
			if e.Code == schemas.ErrContentTypeNotSupported.Code {
				status = http.StatusUnsupportedMediaType
			}
			writePlain(w, status, e.Message)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin tells a browser's cross-origin request from a same-origin
// or non-browser one (Sec-Fetch-Site, else Origin against Host).
var crossOrigin = http.NewCrossOriginProtection()

// checkRoute applies the route rules (see the top of this file) to r: nil,
// or the error row to refuse it with.
func (s *Server) checkRoute(r *http.Request) *schemas.Error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if err := crossOrigin.Check(r); err != nil {
		return schemas.Errorf(schemas.ErrPermissionDenied, "a %s from a browser page of another origin is refused: a2abus takes state-changing requests from its own origin or from clients that are not browsers", r.Method)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil // nothing to read, as an HTTP+JSON cancel or a DELETE sends
	}
	if !jsonMediaType(ct) {
		if ct == "" {
			return schemas.Errorf(schemas.ErrContentTypeNotSupported, "a request body needs Content-Type %s or application/json", contentA2A)
		}
		return schemas.Errorf(schemas.ErrContentTypeNotSupported, "Content-Type %q is not supported; send %s or application/json", trimMediaType(ct), contentA2A)
	}
	return nil
}

// trimMediaType bounds a Content-Type repeated in an error message.
func trimMediaType(ct string) string {
	if len(ct) > 100 {
		ct = ct[:100] + "…"
	}
	return strings.ToValidUTF8(ct, "?")
}
