package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2abus/a2abus/discovery"
)

// runWebhook is "a2abus webhook": a receiver of push notifications that
// verifies each against the sender's keys and prints it, until stopped.
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2abus webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "HOST:PORT to receive notifications on")
	jwks := fs.String("jwks", "", "the sender's keys: an a2abus edge's URL/.well-known/jwks.json (required)")
	hookURL := fs.String("url", "", "the webhook URL as registered with --push-url, which the notifications are signed for (default http://LISTEN/)")
	issuer := fs.String("issuer", "", "accept notifications of this issuer only (default any the keys vouch for)")
	output := fs.String("o", "text", "output: text, or json (one notification a line)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: a2abus webhook --jwks URL [--listen HOST:PORT] [--url URL] [-o text|json]

Receives push notifications, checks each one's signature against the
sender's keys (and that it was signed for this webhook and this body),
drops repeats of an event, and prints the rest. For example:

  a2abus webhook --jwks http://127.0.0.1:8080/.well-known/jwks.json &
  a2abus send http://127.0.0.1:8080 "hello" --no-wait --push-url http://127.0.0.1:9000/

(the edge must accept such a webhook: serve --push true --push-allow-http true --push-allow-private true)
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *jwks == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("webhook needs --jwks and no arguments")
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o must be text or json, got %q", *output)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("webhook listen: %w", err)
	}
	defer l.Close()
	if *hookURL == "" {
		*hookURL = "http://" + l.Addr().String() + "/"
	}
	u, err := url.Parse(*hookURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--url %q is not an absolute URL", *hookURL)
	}
	// The keys are usually the local edge's: loopback and private
	// addresses are allowed, metadata addresses never.
	v, err := discovery.NewNotificationVerifier(ctx, *jwks, *issuer, discovery.Policy{AllowLoopback: true, AllowPrivate: true})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	rc := &discovery.Receiver{Verifier: v, URL: *hookURL, Handle: func(_ context.Context, n *discovery.Notification) error {
		mu.Lock()
		defer mu.Unlock()
		if *output == "json" {
			return json.NewEncoder(stdout).Encode(notificationJSON(n))
		}
		_, err := fmt.Fprintf(stdout, "%s  %s\n", n.TaskID, describeNotification(n))
		return err
	}}
	path := u.Path
	if path == "" {
		path = "/"
	}
	mux := http.NewServeMux()
	mux.Handle(path, rc)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	fmt.Fprintf(stderr, "a2abus webhook: receiving at %s (keys: %s)\n", discovery.RedactURL(*hookURL), discovery.RedactURL(*jwks))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		return err
	}
}

// notificationJSON is what -o json prints of a notification.
func notificationJSON(n *discovery.Notification) any {
	out := map[string]any{"taskId": n.TaskID, "eventId": n.EventID}
	if n.Event != nil {
		out["event"] = n.Event
	}
	if n.Task03 != nil {
		out["task"] = n.Task03
	}
	return out
}

// describeNotification is one line of text for a notification.
func describeNotification(n *discovery.Notification) string {
	switch {
	case n.Task03 != nil:
		return "task " + n.Task03.Status.State
	case n.Event.StatusUpdate != nil:
		s := n.Event.StatusUpdate.Status
		line := "status " + strings.TrimPrefix(string(s.State), "TASK_STATE_")
		if s.Message != nil {
			line += ": " + partsText(s.Message.Parts)
		}
		return line
	case n.Event.ArtifactUpdate != nil:
		a := n.Event.ArtifactUpdate.Artifact
		return "artifact " + a.ArtifactID + ": " + partsText(a.Parts)
	case n.Event.Message != nil:
		return "message: " + partsText(n.Event.Message.Parts)
	case n.Event.Task != nil:
		return "task " + strings.TrimPrefix(string(n.Event.Task.Status.State), "TASK_STATE_")
	}
	return "(empty)"
}
