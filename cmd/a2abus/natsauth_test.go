package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

// A --nats-users file: each user with a password or a bcrypt hash (one of
// them), a role; what the server would misread is refused.
func TestReadUsersFile(t *testing.T) {
	dir := t.TempDir()
	good := writeTemp(t, dir, `[{"user":"e","password":"p1","role":"edge"},{"user":"w","passwordHash":"$2a$04$mnPH8xx4e1vZgg7OgmFTLO5Ip39VTc8Lh5Sv8a557f7JbSQhKUALu","role":"worker"}]`)
	users, err := readUsersFile(good)
	if err != nil {
		t.Fatal(err)
	}
	want := []bus.NATSUser{{Name: "e", Password: "p1", Role: bus.RoleEdge}, {Name: "w", Password: "$2a$04$mnPH8xx4e1vZgg7OgmFTLO5Ip39VTc8Lh5Sv8a557f7JbSQhKUALu", Role: bus.RoleWorker}}
	if len(users) != 2 || users[0] != want[0] || users[1] != want[1] {
		t.Fatalf("users = %+v", users)
	}
	for name, content := range map[string]string{
		"both":             `[{"user":"e","password":"p","passwordHash":"$2a$04$x","role":"edge"}]`,
		"neither":          `[{"user":"e","role":"edge"}]`,
		"hash not bcrypt":  `[{"user":"e","passwordHash":"md5:x","role":"edge"}]`,
		"hash as password": `[{"user":"e","password":"$2a$04$x","role":"edge"}]`,
		"unknown field":    `[{"user":"e","password":"p","role":"edge","admin":true}]`,
		"empty":            `[]`,
		"not json":         `user:pass`,
	} {
		if _, err := readUsersFile(writeTemp(t, dir, content)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// What an edge or worker presents: a user:password file, or a NATS .creds
// file handed to the NATS client by path; anything else is refused.
func TestClientCredentials(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "worker")
	writeFile(t, pw, "worker:s3cret\n")
	if c, err := clientCredentials(pw); err != nil || c != (bus.Credentials{User: "worker", Password: "s3cret"}) {
		t.Fatalf("user:password file: %+v %v", c, err)
	}
	jwt := filepath.Join(dir, "user.creds")
	writeFile(t, jwt, "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.x\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\nSUAEXAMPLE\n------END USER NKEY SEED------\n")
	if c, err := clientCredentials(jwt); err != nil || c != (bus.Credentials{CredsFile: jwt}) {
		t.Fatalf(".creds file: %+v %v", c, err)
	}
	if c, err := clientCredentials(""); err != nil || c != (bus.Credentials{}) {
		t.Fatalf("none: %+v %v", c, err)
	}
	for _, content := range []string{"", "no-colon", ":pass", "user:", "user:pa\nss"} {
		bad := filepath.Join(dir, "bad")
		_ = os.Remove(bad)
		writeFile(t, bad, content)
		if _, err := clientCredentials(bad); err == nil {
			t.Errorf("%q: no error", content)
		}
	}
	if _, err := clientCredentials(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

// "a2abus credentials" makes a deployment's set once: files 0600 in a 0700
// directory, users.json naming the role files' users with their roles; a
// second run keeps everything.
func TestCredentialsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	var out bytes.Buffer
	if err := runCredentials([]string{"--dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	files := []string{"users.json", "cluster", "edge", "worker", "admin"}
	before := map[string]string{}
	for _, f := range files {
		path := filepath.Join(dir, f)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, fi, err)
		}
		b, _ := os.ReadFile(path)
		before[f] = string(b)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v, want mode 0700", fi, err)
	}
	users, err := readUsersFile(filepath.Join(dir, "users.json"))
	if err != nil || len(users) != len(bus.Roles) {
		t.Fatalf("users.json: %+v %v", users, err)
	}
	for _, u := range users {
		c, err := readCredentialsFile(filepath.Join(dir, string(u.Role)))
		if err != nil || c.User != u.Name || c.Password != u.Password {
			t.Errorf("%s: %+v %v does not match users.json", u.Role, c, err)
		}
	}
	if rc, err := readCredentialsFile(filepath.Join(dir, "cluster")); err != nil || rc.User == "" {
		t.Fatalf("cluster: %v", err)
	}
	if err := runCredentials([]string{"--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != before[f] {
			t.Errorf("%s changed on the second run", f)
		}
	}
	if err := runCredentials(nil, io.Discard, io.Discard); err == nil {
		t.Error("no --dir: no error")
	}
}

// A serve whose NATS requires TLS: a worker that trusts its CA
// (--nats-tls-ca) and presents its credentials joins and runs a task.
func TestServeNATSOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	tf := bustest.TLS(t)
	cert, key, ca := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	writeFile(t, cert, string(tf.Cert))
	writeFile(t, key, string(tf.Key))
	writeFile(t, ca, string(tf.CA))
	data := filepath.Join(dir, "data")
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	serve := startProc(t, "serve", "--listen", httpAddr, "--data-dir", data, "--nats-listen", natsAddr, "--agent", "echo",
		"--nats-tls-cert", cert, "--nats-tls-key", key)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	worker := startProc(t, "worker", "--nats", "tls://"+natsAddr, "--nats-creds", servedCreds(data, bus.RoleWorker), "--nats-tls-ca", ca, "--agent", "tck")
	waitAgentCard(t, base, "tck")
	var res struct {
		Task schemas.Task `json:"task"`
	}
	msg := schemas.Message{MessageID: "tck-complete-task-tls", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}}
	if err := json.Unmarshal(rpc(t, base+"/agents/tck", "SendMessage", map[string]any{"message": msg}), &res); err != nil || res.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("a task run by the worker over TLS: %+v %v", res.Task.Status, err)
	}
	if !strings.Contains(serve.output(), "a2abus serve ready") {
		t.Fatalf("serve:\n%s", serve.output())
	}
	worker.stop(t)
	serve.stop(t)
}
