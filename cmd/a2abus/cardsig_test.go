package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// keyFile makes (or rotates) a signing key file with "a2abus push-keys"
// and returns the kid that signs now.
func keyFile(t *testing.T, path string) string {
	t.Helper()
	mustCLI(t, "push-keys", "--file", path)
	k, err := loadSigningKeys(path, "a2abus")
	if err != nil {
		t.Fatal(err)
	}
	return k.KeyID()
}

// servedKid is the kid of the one signature of the card at url.
func servedKid(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Signatures []struct{ Protected string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Signatures) != 1 {
		t.Fatalf("card at %s: %d signatures (%v)", url, len(c.Signatures), err)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(c.Signatures[0].Protected)
	var h struct{ Kid string }
	_ = json.Unmarshal(hdr, &h)
	return h.Kid
}

// remoteStatus is the remote status of agent name in a listing (an
// operator's view: serve on loopback shows it to every caller).
func remoteStatus(l schemas.AgentList, name string) *schemas.RemoteAgentStatus {
	for _, a := range l.Agents {
		if a.Agent == name {
			return a.Remote
		}
	}
	return nil
}

// Signed cards between real processes: an a2abus signs its cards with
// --card-keys; another, whose remote agent trusts that key
// (--card-trust-keys, --card-require-signed), verifies the card and calls
// through; one that trusts only another key set (--card-trust-jwks-url)
// refuses the agent and says why; the client commands check the same way
// and never fall back to calling a refused agent without its card. A
// rotation of the key file (a2abus push-keys) is taken up by the running
// processes without a restart: the edge signs with the new key and
// publishes both, and the gateway goes on verifying.
func TestSignedCardsBetweenProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	keys, other := filepath.Join(dir, "card-keys.json"), filepath.Join(dir, "other-keys.json")
	kid1 := keyFile(t, keys)
	keyFile(t, other)
	otherKeys, err := loadSigningKeys(other, "a2abus")
	if err != nil {
		t.Fatal(err)
	}
	// The other key set, published where a misconfigured gateway fetches
	// it.
	otherJWKS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(otherKeys.JWKS()) }))
	defer otherJWKS.Close()

	extAddr, gwAddr, badAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	ext := startProc(t, "serve", "--listen", extAddr, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off", "--card-keys", keys)
	extURL := "http://" + extAddr
	waitReady(t, ext, extURL)
	if got := servedKid(t, extURL+"/agents/echo/.well-known/agent-card.json"); got != kid1 {
		t.Fatalf("the card is signed by %q, want %q", got, kid1)
	}

	// The client commands.
	out := mustCLI(t, "card", extURL, "--card-trust-keys", keys, "--card-require-signed")
	if !strings.Contains(out, "signature  verified (kid "+kid1+")") {
		t.Fatalf("card with the trusted key:\n%s", out)
	}
	if out := mustCLI(t, "card", extURL); !strings.Contains(out, "signature  1, not checked") {
		t.Fatalf("card without trusted keys:\n%s", out)
	}
	mustCLI(t, "send", extURL, "hi", "--card-trust-jwks-url", extURL+"/.well-known/jwks.json", "--card-require-signed")
	for _, args := range [][]string{{"card", extURL}, {"send", extURL, "hi"}} {
		_, _, err := cli(t, append(args, "--card-trust-keys", other)...)
		if !errors.Is(err, auth.ErrCardUnknownKey) {
			t.Fatalf("%s with another key trusted: %v, want a refusal naming the untrusted key", args[0], err)
		}
		wantCLIError(t, err, "is not a key this client trusts")
	}

	remote := func(trust string) string {
		return fmt.Sprintf(`{"outbound": {"allowLoopback": true, "cardTrust": %s},
  "agents": [{"name": "far", "kind": "remote", "url": "%s/agents/echo", "checkEvery": "200ms"}]}`, trust, extURL)
	}
	gwCfg, badCfg := filepath.Join(dir, "gw.json"), filepath.Join(dir, "bad.json")
	writeFile(t, gwCfg, remote(fmt.Sprintf(`{"keysFile": %q, "requireSigned": true}`, keys)))
	writeFile(t, badCfg, remote(fmt.Sprintf(`{"jwksUrl": %q}`, otherJWKS.URL+"/jwks.json")))
	gw := startProc(t, "serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", gwCfg)
	bad := startProc(t, "serve", "--listen", badAddr, "--data-dir", filepath.Join(dir, "bad"), "--nats-listen", "off", "--config", badCfg)
	gwURL, badURL := "http://"+gwAddr, "http://"+badAddr
	waitReady(t, gw, gwURL)
	waitReady(t, bad, badURL)
	waitAgents(t, gwURL, "?kind=remote", "far online through a verified card", func(l schemas.AgentList) bool { return health(l, "far") == schemas.HealthOnline })
	var send struct {
		Task schemas.Task `json:"task"`
	}
	msg := schemas.Message{MessageID: "m1", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("signed and sealed")}}
	if err := json.Unmarshal(rpc(t, gwURL+"/agents/far", "SendMessage", map[string]any{"message": msg}), &send); err != nil || artifactText(send.Task) != "signed and sealed" {
		t.Fatalf("through the verified remote agent: %+v, %v", send.Task, err)
	}
	refused := waitAgents(t, badURL, "?kind=remote", "far refused", func(l schemas.AgentList) bool {
		st := remoteStatus(l, "far")
		return st != nil && st.Health == schemas.HealthOffline && strings.Contains(st.LastError, "is not a key this client trusts")
	})
	if st := remoteStatus(refused, "far"); st.LastSeen != nil {
		t.Fatalf("the refused agent was seen: %+v", st)
	}
	// The gateway serves its own card for the remote agent, not the
	// external agent's signature.
	resp, err := http.Get(gwURL + "/agents/far/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), `"signatures"`) {
		t.Fatalf("the gateway, which has no card keys, serves a signature: %s", body)
	}

	// Rotation, with every process running.
	kid2 := keyFile(t, keys)
	deadline := time.Now().Add(30 * time.Second)
	for servedKid(t, extURL+"/agents/echo/.well-known/agent-card.json") != kid2 {
		if time.Now().After(deadline) {
			t.Fatalf("the edge never signed with the rotated key %s", kid2)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's file watch
	}
	rotatedAt := time.Now()
	resp, err = http.Get(extURL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, kid := range []string{kid1, kid2} {
		if !strings.Contains(string(jwks), `"kid":"`+kid+`"`) {
			t.Fatalf("the JWKS after the rotation lacks %s: %s", kid, jwks)
		}
	}
	waitAgents(t, gwURL, "?kind=remote", "far verified after the rotation", func(l schemas.AgentList) bool {
		st := remoteStatus(l, "far")
		return st != nil && st.Health == schemas.HealthOnline && st.LastSeen != nil && st.LastSeen.After(rotatedAt)
	})

	bad.stop(t)
	gw.stop(t)
	ext.stop(t)
}

// A key file is read again when it changes: a rotation is taken up
// without a restart, and a file that no longer loads keeps the keys in
// use.
func TestKeyFilesAreReloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	kid1 := keyFile(t, path)
	kr, err := loadReloaded(path, "card signing keys", func(p string) (*auth.SigningKeys, error) { return loadSigningKeys(p, "a2abus") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logged := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() { kr.watch(ctx, 5*time.Millisecond, slog.New(logTo(logged)), nil) })
	defer func() { cancel(); wg.Wait() }()
	waitKid := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for kr.get().KeyID() != want {
			if time.Now().After(deadline) {
				t.Fatalf("the keys in use are %s, want %s", kr.get().KeyID(), want)
			}
			time.Sleep(5 * time.Millisecond) // polling the watch's ticker
		}
	}
	if kr.get().KeyID() != kid1 {
		t.Fatalf("loaded %s, want %s", kr.get().KeyID(), kid1)
	}
	kid2 := keyFile(t, path)
	waitKid(kid2)

	// A broken file is not taken (the watch says so, and keeps the keys);
	// the next good one is.
	writeFile(t, path, "not a key set")
	later := time.Now().Add(time.Hour) // a modification time the watch cannot have seen
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(recvLog(t, logged), "does not load") { // passing over the reload's message
	}
	if kr.get().KeyID() != kid2 {
		t.Fatalf("a broken file replaced the keys: %s", kr.get().KeyID())
	}
	kid3 := keyFile(t, path+".next")
	if err := os.Rename(path+".next", path); err != nil {
		t.Fatal(err)
	}
	waitKid(kid3)
	if kid3 == kid2 {
		t.Fatal("the rotation made no new key")
	}
}

// logTo is a slog handler sending each record's message to ch.
func logTo(ch chan<- string) slog.Handler { return chanHandler{ch} }

type chanHandler struct{ ch chan<- string }

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

func recvLog(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the watch logged nothing")
		return ""
	}
}
