package edge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/a2abus/a2abus/edge/ui"
	"github.com/a2abus/a2abus/schemas"
)

// The dashboard's side doors: its static page (edge/ui), public because
// it holds no data (every datum it shows comes from the API with its
// user's credentials), and the dead letters, an admin's.

// uiPolicy is the Content-Security-Policy of the page: its own scripts,
// styles and API only (no inline script, no other origin), images of
// artifacts from data: and blob: URLs, and no framing.
const uiPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// uiAsset is one file of the page, as served.
type uiAsset struct {
	body        []byte
	contentType string
	etag        string
}

// uiFiles is the dashboard's handler, built once for both its routes.
var uiFiles = sync.OnceValue(uiHandler)

// uiHandler serves the page's files, read once from the embedded set:
// GET /ui is index.html, GET /ui/{file} the others; anything else is 404.
func uiHandler() http.Handler {
	assets := map[string]uiAsset{}
	_ = fs.WalkDir(ui.Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(ui.Files, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[name] = uiAsset{body: b, contentType: mime.TypeByExtension(path.Ext(name)), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		h := w.Header()
		h.Set("Content-Security-Policy", uiPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if !ok {
			writePlain(w, http.StatusNotFound, "no such file of the dashboard")
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		// Conditional requests (If-None-Match lists, W/, *), HEAD and
		// Content-Length as net/http answers them for any file.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// deadLettersMax bounds a listing of dead letters.
const deadLettersMax = 200

// handleDeadLetters lists the newest dead letters of a kind
// (?kind=work|push, default work; ?limit=N, default 50, at most
// deadLettersMax): agent, task, reason and time, never a body.
func (s *Server) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind := q.Get("kind")
	switch kind {
	case "":
		kind = schemas.DeadLetterWork
	case schemas.DeadLetterWork, schemas.DeadLetterPush:
	default:
		writePlain(w, http.StatusBadRequest, "kind is work or push")
		return
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > deadLettersMax {
			writePlain(w, http.StatusBadRequest, "limit is a number from 1 to "+strconv.Itoa(deadLettersMax))
			return
		}
		limit = n
	}
	list, err := s.deadLetters.ListDeadLetters(r.Context(), kind, limit)
	if err != nil {
		writeUnavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deadLetters": list})
}
