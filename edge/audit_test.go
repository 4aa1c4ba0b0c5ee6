package edge_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// auditHarness is an edge on loopback, open to its loopback admins, whose
// trust policy makes 127.0.0.2 public (audited by default), 127.0.0.3
// partner (not audited) and 127.0.0.4 blocked (refused, audited).
func auditHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, harnessOptions{bus: bustest.Options{Listen: "127.0.0.1:0"},
		agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{DefaultAgent: "echo", OpenAdmin: true, LoopbackOnly: true,
			Trust: edge.TrustPolicy{
				Rules: []edge.TrustRule{
					{Level: edge.TrustPublic, Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}},
					{Level: "partner", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}},
					{Level: "blocked", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.4/32")}},
				},
				Levels: map[string]edge.TrustLevel{"blocked": {Refuse: true, Audit: true}},
			}}})
}

// auditRecords reads the audit route of the edge at base with query.
func auditRecords(t *testing.T, base string, query url.Values) []schemas.AuditRecord {
	t.Helper()
	status, _, body := as(t, "", "GET", base+"/a2a/admin/audit?"+query.Encode(), "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /a2a/admin/audit: %d %s", status, body)
	}
	var r struct {
		Records []schemas.AuditRecord `json:"records"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r.Records
}

// A call of an audited level (public, by its source) is recorded before
// it runs and with its outcome after; one of an unaudited level
// (partner) is not; a call refused by an audited level is recorded as
// refused. No record holds the message's text.
func TestAuditedLevelIsRecordedOthersAreNot(t *testing.T) {
	h := auditHarness(t)
	secret := "audit-secret-" + schemas.NewID()
	task, code := sendAs(t, from("127.0.0.2"), h.url, "echo", secret, nil)
	if code != 0 || task.ID == "" {
		t.Fatalf("public send: code %d", code)
	}
	if _, code := sendAs(t, from("127.0.0.3"), h.url, "echo", secret, nil); code != 0 {
		t.Fatalf("partner send: code %d", code)
	}
	if _, code := sendAs(t, from("127.0.0.4"), h.url, "echo", secret, nil); code != schemas.ErrPermissionDenied.Code {
		t.Fatalf("blocked send: code %d, want %d", code, schemas.ErrPermissionDenied.Code)
	}

	recs := auditRecords(t, h.url, url.Values{"limit": {"100"}})
	var public, refused []schemas.AuditRecord
	for _, r := range recs {
		switch r.Source {
		case "127.0.0.2":
			public = append(public, r)
		case "127.0.0.3":
			t.Errorf("a record of the unaudited level: %+v", r)
		case "127.0.0.4":
			refused = append(refused, r)
		}
	}
	if len(public) != 2 {
		t.Fatalf("public records %+v, want the one before and the one after the send", public)
	}
	before, after := public[0], public[1]
	if before.Decision != schemas.AuditAdmitted || before.Outcome != schemas.AuditPending || before.Method != "SendMessage" ||
		before.Trust != edge.TrustPublic || before.Agent != "echo" || before.Binding == "" || before.Kind != schemas.AuditCall {
		t.Errorf("the record before the call: %+v", before)
	}
	if after.Decision != schemas.AuditAdmitted || after.Outcome != schemas.AuditOK || after.TaskID != task.ID {
		t.Errorf("the record after the call: %+v, want ok for task %s", after, task.ID)
	}
	if len(refused) != 1 || refused[0].Decision != schemas.AuditRefused || refused[0].Trust != "blocked" ||
		refused[0].Outcome != schemas.AuditOutcome(schemas.ErrPermissionDenied) {
		t.Errorf("the refused call's records: %+v, want one, refused", refused)
	}
	if got := auditRecords(t, h.url, url.Values{"task": {task.ID}}); len(got) != 1 || got[0].Outcome != schemas.AuditOK {
		t.Errorf("records of task %s: %+v, want the outcome's", task.ID, got)
	}
	stored := bustest.StoredMessages(t, h.b, schemas.StreamAudit)
	if len(stored) != len(recs) {
		t.Errorf("the stream holds %d records, the route read %d", len(stored), len(recs))
	}
	for _, m := range stored {
		if bytes.Contains(m, []byte(secret)) {
			t.Fatalf("an audit record holds the message's text: %s", m)
		}
	}
}

// A call of an audited level whose record cannot be written is refused
// (unavailable, saying why) and not run: no task is stored. An unaudited
// level is served meanwhile. Once the stream is provisioned again the
// audited call runs.
func TestAuditFailureRefusesTheCall(t *testing.T) {
	h := auditHarness(t)
	bustest.DeleteStream(t, h.srv, schemas.StreamAudit)
	secret := "not-run-" + schemas.NewID()
	if _, code := sendAs(t, from("127.0.0.2"), h.url, "echo", secret, nil); code != schemas.ErrUnavailable.Code {
		t.Fatalf("audited send without the audit stream: code %d, want %d", code, schemas.ErrUnavailable.Code)
	}
	for _, m := range bustest.StoredMessages(t, h.b, "KV_"+schemas.BucketTasks) {
		if bytes.Contains(m, []byte(secret)) {
			t.Fatal("the refused call stored a task")
		}
	}
	if _, code := sendAs(t, from("127.0.0.3"), h.url, "echo", "unaudited", nil); code != 0 {
		t.Fatalf("unaudited send: code %d", code)
	}
	bustest.Provision(t, h.b)
	if task, code := sendAs(t, from("127.0.0.2"), h.url, "echo", "again", nil); code != 0 || task.ID == "" {
		t.Fatalf("audited send after provisioning: code %d", code)
	}
	if got := auditRecords(t, h.url, url.Values{}); len(got) != 2 {
		t.Errorf("records after provisioning: %+v, want the send's two", got)
	}
}

// Registry changes are admin actions, always audited: before (refused
// when the record cannot be written, the entry unchanged) and after.
func TestRegistryChangesAreAudited(t *testing.T) {
	h := auditHarness(t)
	const entry = `{"maintenance": "upgrading"}`
	if status, _, body := as(t, "", "PUT", h.url+"/a2a/admin/agents/echo", "application/json", entry); status != http.StatusOK {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if status, _, body := as(t, "", "DELETE", h.url+"/a2a/admin/agents/echo", "", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	recs := auditRecords(t, h.url, url.Values{"agent": {"echo"}})
	var got []string
	for _, r := range recs {
		if r.Kind == schemas.AuditAdmin {
			got = append(got, r.Method+" "+r.Decision+" "+r.Outcome+" "+r.Source)
		}
	}
	want := []string{
		"registry.put admitted pending 127.0.0.1", "registry.put admitted ok 127.0.0.1",
		"registry.delete admitted pending 127.0.0.1", "registry.delete admitted ok 127.0.0.1",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("admin records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	bustest.DeleteStream(t, h.srv, schemas.StreamAudit)
	status, _, body := as(t, "", "PUT", h.url+"/a2a/admin/agents/echo", "application/json", entry)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "audit record") {
		t.Fatalf("PUT without the audit stream: %d %s, want 503 naming the audit record", status, body)
	}
	if status, _, _ := as(t, "", "GET", h.url+"/a2a/admin/agents/echo", "", ""); status != http.StatusNotFound {
		t.Errorf("the entry after the refused PUT: %d, want none", status)
	}
}
