package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	files := []string{"users.json", "cluster", "edge", "edge-admin", "worker", "admin"}
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

// A set made by a release without the edge-admin role (files admin, edge,
// worker, cluster and a users.json naming three users): "a2abus
// credentials" makes the edge-admin file, adds its user to the users.json
// kept, keeps every other file and user as it was, says so, and does not
// bring back a user the operator removed.
func TestCredentialsCommandAddsANewRoleToAnOlderSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{"admin": "admin:a0", "edge": "edge:e0", "worker": "worker:w0", "cluster": "route:r0"}
	for f, line := range old {
		writeFile(t, filepath.Join(dir, f), line+"\n")
	}
	oldUsers := `[{"user":"admin","password":"a0","role":"admin"},{"user":"edge","password":"e0","role":"edge"},` +
		`{"user":"worker","passwordHash":"$2a$04$mnPH8xx4e1vZgg7OgmFTLO5Ip39VTc8Lh5Sv8a557f7JbSQhKUALu","role":"worker"}]`
	usersPath := filepath.Join(dir, "users.json")
	writeFile(t, usersPath, oldUsers)
	var out bytes.Buffer
	if err := runCredentials([]string{"--dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for f, line := range old {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != line+"\n" {
			t.Errorf("%s changed: %q", f, b)
		}
	}
	ea, err := readCredentialsFile(filepath.Join(dir, string(bus.RoleAdminEdge)))
	if err != nil || ea.User != string(bus.RoleAdminEdge) {
		t.Fatalf("edge-admin: %+v %v", ea, err)
	}
	if fi, err := os.Stat(usersPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users.json: %v %v, want mode 0600", fi, err)
	}
	users, err := readUsersFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []bus.NATSUser{{Name: "admin", Password: "a0", Role: bus.RoleAdmin}, {Name: "edge", Password: "e0", Role: bus.RoleEdge},
		{Name: "worker", Password: "$2a$04$mnPH8xx4e1vZgg7OgmFTLO5Ip39VTc8Lh5Sv8a557f7JbSQhKUALu", Role: bus.RoleWorker},
		{Name: ea.User, Password: ea.Password, Role: bus.RoleAdminEdge}}
	if !slices.Equal(users, want) {
		t.Fatalf("users.json:\n %+v\nwant the three kept and the edge-admin:\n %+v", users, want)
	}
	if !strings.Contains(out.String(), "added the users of edge-admin") || !strings.Contains(out.String(), "restart every node") {
		t.Errorf("the output does not say users.json gained a user:\n%s", out.String())
	}
	if strings.Contains(out.String(), ea.Password) {
		t.Error("the output shows a password")
	}

	// Run again: nothing changes, nothing is said to have been added.
	before, _ := os.ReadFile(usersPath)
	out.Reset()
	if err := runCredentials([]string{"--dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(usersPath); string(b) != string(before) || strings.Contains(out.String(), "added") {
		t.Errorf("a second run changed users.json or added users:\n%s", out.String())
	}

	// A user the operator took out of users.json stays out while its file
	// is kept.
	writeFile(t, usersPath, oldUsers[:strings.Index(oldUsers, `{"user":"worker"`)-1]+"]")
	if err := runCredentials([]string{"--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if users, err := readUsersFile(usersPath); err != nil || len(users) != 2 {
		t.Errorf("users.json after the operator removed two users: %+v %v, want them still removed", users, err)
	}
}

// A serve's data directory made by a release without the edge-admin role:
// the first start after the upgrade makes its file, serves its user with
// the others, keeps the files there, and names the new file in its log.
func TestServeCredentialsGainTheEdgeAdminRole(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, credentialsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := map[bus.Role]string{bus.RoleAdmin: "admin:a0", bus.RoleEdge: "edge:e0", bus.RoleWorker: "worker:w0"}
	for role, line := range old {
		writeFile(t, servedCreds(data, role), line+"\n")
	}
	var logs bytes.Buffer
	p := &process{cfg: Config{DataDir: data}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	sc := &bus.ServerConfig{Listen: "127.0.0.1:0"}
	if err := p.serverAuth(sc); err != nil {
		t.Fatal(err)
	}
	for role, line := range old {
		if b, _ := os.ReadFile(servedCreds(data, role)); string(b) != line+"\n" {
			t.Errorf("%s changed: %q", role, b)
		}
	}
	path := servedCreds(data, bus.RoleAdminEdge)
	ea, err := readCredentialsFile(path)
	if fi, serr := os.Stat(path); err != nil || serr != nil || fi.Mode().Perm() != 0o600 || ea.User != string(bus.RoleAdminEdge) {
		t.Fatalf("%s: %+v %v %v", path, ea.User, err, serr)
	}
	roles := map[bus.Role]bus.NATSUser{}
	for _, u := range sc.Users {
		roles[u.Role] = u
	}
	if len(sc.Users) != len(bus.Roles) || roles[bus.RoleAdminEdge] != (bus.NATSUser{Name: ea.User, Password: ea.Password, Role: bus.RoleAdminEdge}) ||
		roles[bus.RoleEdge].Password != "e0" {
		t.Fatalf("the server's users: %+v", sc.Users)
	}
	if !strings.Contains(logs.String(), "edge_admin="+path) || !strings.Contains(logs.String(), "made those of edge-admin") || strings.Contains(logs.String(), ea.Password) {
		t.Errorf("the log does not name the new file (or shows its password):\n%s", logs.String())
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
