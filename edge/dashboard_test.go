package edge_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// The dashboard's page is served from the binary with headers that let it
// run only its own scripts and styles, and never be framed; the dead
// letters are listed for admins, without bodies.
func TestDashboardIsServedWithItsPolicy(t *testing.T) {
	h := authHarness(t)
	for _, c := range []struct{ path, ctype, holds string }{
		{"/ui", "text/html", `src="/ui/app.js"`},
		{"/ui/", "text/html", `src="/ui/app.js"`},
		{"/ui/app.js", "text/javascript", schemas.MethodWatchTasks},
		{"/ui/app.css", "text/css", "body"},
	} {
		resp, raw := h.do("GET", c.path, "", nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(raw), c.holds) {
			t.Fatalf("GET %s: HTTP %d %s, %.100s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", c.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline or eval'd script", c.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", c.path, resp.Header)
		}
		etag := resp.Header.Get("ETag")
		if resp, _ := h.do("GET", c.path, "", map[string]string{"If-None-Match": etag}); etag == "" || resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s again with its ETag %q: HTTP %d", c.path, etag, resp.StatusCode)
		}
	}
	// No inline script: the page's scripts are files the policy allows.
	_, page := h.do("GET", "/ui", "", nil)
	if strings.Contains(string(page), "<script>") || regexp.MustCompile(`\son[a-z]+=`).Match(page) {
		t.Errorf("the page has inline script")
	}
	if resp, _ := h.do("GET", "/ui/nothing.js", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing.js: HTTP %d", resp.StatusCode)
	}

	resp, raw := h.do("GET", "/a2a/admin/dead-letters?kind=push&limit=5", "", map[string]string{"X-API-Key": opsKey})
	var list struct {
		DeadLetters []schemas.DeadLetterSummary `json:"deadLetters"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &list) != nil || list.DeadLetters == nil {
		t.Fatalf("dead letters for an admin: HTTP %d %s", resp.StatusCode, raw)
	}
	for _, q := range []string{"kind=mail", "limit=0", "limit=100000"} {
		if resp, raw := h.do("GET", "/a2a/admin/dead-letters?"+q, "", map[string]string{"X-API-Key": opsKey}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("dead letters ?%s: HTTP %d %s", q, resp.StatusCode, raw)
		}
	}
}
