package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The run-time registry's admin API: admin principals register, change
// and remove remote agents, and put agents in maintenance, without a
// restart. Entries are stored in the bus's registry bucket, so every edge
// and worker sees them: serve and worker processes run the remote agents,
// edges show maintenance and refuse new tasks for such agents.
//
//	GET    /a2a/admin/agents          every entry
//	GET    /a2a/admin/agents/{agent}  one
//	PUT    /a2a/admin/agents/{agent}  set it: {"remote": {...}, "maintenance": "why"}
//	DELETE /a2a/admin/agents/{agent}  remove it (a remote agent stops)
//
// Their rows in routeTable declare who may use them (PolicyAdmin, and
// PolicyAdminWrite for the two that write) and their limits.

// registryEntryMax bounds the body of a registry PUT.
const registryEntryMax = 64 << 10

func (s *Server) handleRegistryList(w http.ResponseWriter, r *http.Request) {
	es, err := s.registry.RegistryEntries(r.Context())
	if err != nil {
		writeUnavailable(w, err)
		return
	}
	if es == nil {
		es = []schemas.RegistryEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": es})
}

func (s *Server) handleRegistryGet(w http.ResponseWriter, r *http.Request) {
	e, ok, err := s.registry.RegistryEntry(r.Context(), r.PathValue("agent"))
	switch {
	case err != nil:
		writeUnavailable(w, err)
	case !ok:
		writePlain(w, http.StatusNotFound, "no registry entry for agent "+r.PathValue("agent"))
	default:
		writeJSON(w, http.StatusOK, e)
	}
}

func (s *Server) handleRegistryPut(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writePlain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a registry entry is at most %d KiB", registryEntryMax>>10))
		return
	}
	var e schemas.RegistryEntry
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		writePlain(w, http.StatusBadRequest, "the body is not a registry entry ({\"remote\": {...}, \"maintenance\": \"why\"}): "+err.Error())
		return
	}
	if e.Agent != "" && e.Agent != agent {
		writePlain(w, http.StatusBadRequest, fmt.Sprintf("the body names agent %q, the path %q", e.Agent, agent))
		return
	}
	e.Agent = agent
	if err := checkEntry(&e, s.cfg.RemoteEnvAllow); err != nil {
		writePlain(w, http.StatusBadRequest, err.Error())
		return
	}
	e.UpdatedBy = adminCaller(r).principal
	e.UpdatedAt = *schemas.Now()
	if !s.auditAdminBefore(w, r, schemas.AuditActionRegistryPut, agent, "", schemas.AuditAdmitted) {
		return
	}
	err = s.registry.PutRegistryEntry(r.Context(), e)
	s.auditAdminAfter(r, schemas.AuditActionRegistryPut, agent, "", schemas.AuditAdmitted, err)
	if err != nil {
		if se := schemas.AsError(err); se.Code == schemas.ErrInvalidParams.Code {
			writePlain(w, http.StatusBadRequest, se.Message)
			return
		}
		s.writeChangeFailed(w, agent, err)
		return
	}
	s.log.Info("registry entry set", "agent", agent, "by", e.UpdatedBy, "remote", e.Remote != nil, "maintenance", e.Maintenance != "")
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) handleRegistryDelete(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	if !s.auditAdminBefore(w, r, schemas.AuditActionRegistryDelete, agent, "", schemas.AuditAdmitted) {
		return
	}
	err := s.registry.DeleteRegistryEntry(r.Context(), agent)
	s.auditAdminAfter(r, schemas.AuditActionRegistryDelete, agent, "", schemas.AuditAdmitted, err)
	if err != nil {
		s.writeChangeFailed(w, agent, err)
		return
	}
	s.log.Info("registry entry removed", "agent", agent)
	w.WriteHeader(http.StatusNoContent)
}

// checkEntry checks what an admin sent: an agent name, and for a remote
// agent an absolute http(s) URL, a duration, a binding, header names and
// values fit for headers, and environment variables the operator lets
// registered agents read (envAllow: see schemas.RemoteEnvAllowed). Where
// the URL may point is checked by the processes that run the agent (their
// outbound policy), which check the variables again.
func checkEntry(e *schemas.RegistryEntry, envAllow []string) error {
	if !schemas.ValidAgentName(e.Agent) {
		return fmt.Errorf("%q is not an agent name (lowercase letters, digits, '-', '_')", e.Agent)
	}
	if e.Remote == nil && e.Maintenance == "" {
		return fmt.Errorf("an entry sets a remote agent (\"remote\": {\"url\": ...}), maintenance (\"maintenance\": \"why\"), or both; to clear one, DELETE it")
	}
	if len(e.Maintenance) > 512 || strings.ContainsFunc(e.Maintenance, func(r rune) bool { return r < 0x20 }) {
		return fmt.Errorf("maintenance is a short reason (at most 512 characters, one line)")
	}
	r := e.Remote
	if r == nil {
		return nil
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("remote.url must be an absolute http(s) URL without user credentials")
	}
	if r.CheckEvery != "" {
		if d, err := time.ParseDuration(r.CheckEvery); err != nil || d < time.Second {
			return fmt.Errorf("remote.checkEvery %q is not a duration of a second or more", r.CheckEvery)
		}
	}
	switch r.Binding {
	case "", schemas.BindingJSONRPC, schemas.BindingHTTPJSON, schemas.BindingGRPC:
	default:
		return fmt.Errorf("remote.binding %q is not JSONRPC, HTTP+JSON or GRPC", r.Binding)
	}
	for k := range r.Headers {
		if credentialHeader(k) {
			return fmt.Errorf("remote.headers: %s is named like a header carrying a credential, which the registry does not store (every admin can read it); name the workers' environment variable holding it in remote.headersFromEnv", k)
		}
	}
	for _, m := range []map[string]string{r.Headers, r.HeadersFromEnv} {
		for k, v := range m {
			if !schemas.HTTPToken(k) || !schemas.HeaderValueSafe(v) {
				return fmt.Errorf("remote header %q is not a header name and value", k)
			}
		}
	}
	if err := r.CheckRemoteEnv(envAllow); err != nil {
		return err
	}
	for _, t := range r.Tags {
		if t == "" || len(t) > 64 {
			return fmt.Errorf("remote.tags: %q is not a tag (1 to 64 characters)", t)
		}
	}
	return nil
}

// credentialHeader reports whether a header name is one that carries, or
// looks like it carries, a credential: its name contains, in any case, a
// word of credentialWords (Authorization, Cookie, X-Auth-Token, Api-Key,
// X-Goog-Api-Key, X-Session-Id, ...). The registry's plain headers are
// shown to every admin, so such a header is refused there and belongs in
// headersFromEnv, whatever its value; a name that merely looks like one
// (Keyboard-Layout) goes there too, at no cost.
func credentialHeader(name string) bool {
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// credentialWords are what the names of headers carrying credentials
// contain.
var credentialWords = []string{"token", "key", "secret", "auth", "password", "passwd", "cookie", "session", "credential", "signature"}

// writeChangeFailed answers a registry change the bus did not make: one
// this edge's NATS user may not make (403: other credentials help, a
// retry does not; said in the log too, since the operator must act), or a
// bus failure (retry later).
func (s *Server) writeChangeFailed(w http.ResponseWriter, agent string, err error) {
	if errors.Is(err, bus.ErrNotPermitted) {
		s.log.Warn("an admin's registry change refused: this edge's NATS user may not change the registry; give the edge the "+string(bus.RoleAdminEdge)+" credentials",
			"agent", agent)
		writePlain(w, http.StatusForbidden, errRegistryReadOnly)
		return
	}
	writeUnavailable(w, err)
}

// errRegistryReadOnly is why an edge whose NATS user may not write the
// registry (bus.RoleEdge) refuses a change an admin asked for.
const errRegistryReadOnly = "this edge's NATS credentials (role " + string(bus.RoleEdge) + ") may not change the registry; give it the " +
	string(bus.RoleAdminEdge) + " credentials (--nats-creds DIR/" + string(bus.RoleAdminEdge) + ", made by serve or \"a2abus credentials\")"

// writeUnavailable answers a bus failure: retry later.
func writeUnavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "5")
	writePlain(w, http.StatusServiceUnavailable, "the registry cannot be reached now; retry ("+schemas.AsError(err).Message+")")
}
