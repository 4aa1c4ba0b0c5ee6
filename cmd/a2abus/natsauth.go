package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2abus/a2abus/bus"
)

// Credentials on the NATS listeners. An embedded server that listens on
// the network (serve with --nats-listen other than "off", node) accepts
// only its users, each with a role (bus.Role: admin, edge, edge-admin,
// worker), and a cluster member accepts routes only from members
// presenting the cluster's credentials:
//
//   - --nats-users FILE is the server's users, a JSON list of
//     {"user", "password" or "passwordHash" (bcrypt), "role"}. Every
//     member of a cluster needs the same list.
//   - Without --nats-users, a standalone serve or node makes its own: a
//     random password per role, kept in <data-dir>/nats-credentials/
//     (directory 0700, one file per role, 0600, "user:password") and used
//     again on the next start, so processes that joined keep working;
//     delete the directory to make new ones. Its log says where they are.
//     A role added by a newer release gets its file (and its user) on the
//     first start after the upgrade; the others are kept.
//     A cluster member cannot make its own (all members must agree) and
//     refuses to start without --nats-users.
//   - --cluster-creds FILE ("user:password") authenticates the routes of
//     a cluster member; required with --cluster-listen.
//   - --nats-creds FILE is what an edge or worker presents: a
//     "user:password" file like the ones above, or a NATS .creds file
//     (user JWT and nkey seed) to join a NATS deployment that uses
//     decentralized (operator/JWT) authentication. An edge whose admins
//     change the agent registry presents the edge-admin role's; the edge
//     role's may read the registry but not change it.
//   - --nats-tls-cert, --nats-tls-key (serve, node): TLS on the client
//     listener and the routes; --nats-tls-ca: the CA that members verify
//     each other's certificates with (mutual TLS on routes), and that an
//     edge or worker verifies its server's with.
//
// "a2abus credentials --dir DIR" makes a set for a deployment (compose.yaml
// does): DIR/admin, DIR/edge, DIR/edge-admin, DIR/worker, DIR/cluster and
// DIR/users.json naming the four users. Run again on a set made by an
// earlier release, it makes the files of roles added since and adds their
// users to the users.json it kept (see runCredentials).

// credentialsDir is where serve and a standalone node keep the
// credentials they made, under the data directory.
const credentialsDir = "nats-credentials"

// usersFileEntry is one user in a --nats-users file.
type usersFileEntry struct {
	User string `json:"user"`
	// Password is the password in clear; PasswordHash its bcrypt hash
	// (e.g. from "nats server passwd" or "htpasswd -nbB"). One of them.
	Password     string `json:"password,omitempty"`
	PasswordHash string `json:"passwordHash,omitempty"`
	Role         string `json:"role"`
}

// readUsersFile reads a --nats-users file.
func readUsersFile(path string) ([]bus.NATSUser, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats users: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var entries []usersFileEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("nats users %s: %w", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("nats users %s: no users", path)
	}
	users := make([]bus.NATSUser, 0, len(entries))
	for _, e := range entries {
		pass := e.Password
		switch {
		case (e.Password == "") == (e.PasswordHash == ""):
			return nil, fmt.Errorf("nats users %s: user %q needs a password or a passwordHash (one of them)", path, e.User)
		case e.PasswordHash != "":
			if !strings.HasPrefix(e.PasswordHash, "$2") {
				return nil, fmt.Errorf("nats users %s: the passwordHash of user %q is not a bcrypt hash ($2a$…)", path, e.User)
			}
			pass = e.PasswordHash
		case strings.HasPrefix(e.Password, "$2"):
			// The server would take it for a hash and never match it.
			return nil, fmt.Errorf("nats users %s: the password of user %q looks like a bcrypt hash; put it in passwordHash", path, e.User)
		}
		users = append(users, bus.NATSUser{Name: e.User, Password: pass, Role: bus.Role(e.Role)})
	}
	return users, nil
}

// readCredentialsFile reads a "user:password" file.
func readCredentialsFile(path string) (bus.Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return bus.Credentials{}, err
	}
	return passwordCredentials(path, b)
}

// passwordCredentials parses the "user:password" file read from path.
func passwordCredentials(path string, b []byte) (bus.Credentials, error) {
	c, err := bus.ParsePasswordCredentials(string(b))
	if err != nil {
		return bus.Credentials{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// natsJWTHeader starts the user JWT of a NATS .creds file.
const natsJWTHeader = "-----BEGIN NATS USER JWT-----"

// clientCredentials reads what an edge or worker presents to NATS
// (--nats-creds): a NATS .creds file is handed to the NATS client by
// path (it reads it at every connect), a "user:password" file is read
// here. No file: no credentials.
func clientCredentials(path string) (bus.Credentials, error) {
	if path == "" {
		return bus.Credentials{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return bus.Credentials{}, fmt.Errorf("nats credentials: %w", err)
	}
	if bytes.Contains(b, []byte(natsJWTHeader)) {
		return bus.Credentials{CredsFile: path}, nil
	}
	c, err := passwordCredentials(path, b)
	if err != nil {
		return bus.Credentials{}, fmt.Errorf("nats credentials %w (or a NATS .creds file)", err)
	}
	return c, nil
}

// clientAuth is what an edge or worker connects to NATS with.
type clientAuth struct {
	creds bus.Credentials
	tls   *bus.TLSFiles
}

// clientAuth reads --nats-creds and --nats-tls-ca.
func (c *Config) clientAuth() (clientAuth, error) {
	creds, err := clientCredentials(c.NATSCreds)
	if err != nil {
		return clientAuth{}, err
	}
	tf, err := c.readTLS(false)
	if err != nil {
		return clientAuth{}, err
	}
	return clientAuth{creds: creds, tls: tf}, nil
}

// readTLS reads the PEM files of the NATS TLS settings; nil when none is
// set. withKey asks for the certificate and key (a server's).
func (c *Config) readTLS(withKey bool) (*bus.TLSFiles, error) {
	var f bus.TLSFiles
	read := func(path, what string, to *[]byte) error {
		if path == "" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("nats TLS %s: %w", what, err)
		}
		*to = b
		return nil
	}
	if withKey {
		if err := read(c.NATSTLSCert, "certificate", &f.Cert); err != nil {
			return nil, err
		}
		if err := read(c.NATSTLSKey, "key", &f.Key); err != nil {
			return nil, err
		}
	}
	if err := read(c.NATSTLSCA, "CA", &f.CA); err != nil {
		return nil, err
	}
	if f.Cert == nil && f.CA == nil {
		return nil, nil
	}
	if withKey && f.Cert == nil {
		// A CA alone says nothing to a server: it has no certificate.
		return nil, errors.New("--nats-tls-ca on a server needs --nats-tls-cert and --nats-tls-key")
	}
	return &f, nil
}

// ensureCredentials returns the "user:password" credentials of every role
// kept in dir, making (0600, in a 0700 directory) those that are
// missing. made are the roles whose files were made.
func ensureCredentials(dir string) (creds map[bus.Role]bus.Credentials, made []bus.Role, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("nats credentials: %w", err)
	}
	creds = map[bus.Role]bus.Credentials{}
	for _, role := range bus.Roles {
		c, m, err := ensureCredentialsFile(filepath.Join(dir, string(role)), string(role))
		if err != nil {
			return nil, nil, err
		}
		creds[role] = c
		if m {
			made = append(made, role)
		}
	}
	return creds, made, nil
}

// ensureCredentialsFile reads path, or makes it with user and a random
// password if it does not exist.
func ensureCredentialsFile(path, user string) (bus.Credentials, bool, error) {
	c, err := readCredentialsFile(path)
	if err == nil {
		return c, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return bus.Credentials{}, false, fmt.Errorf("nats credentials: %w", err)
	}
	c = bus.Credentials{User: user, Password: bus.NewPassword()}
	if err := writeSecret(path, []byte(c.Line()+"\n")); err != nil {
		return bus.Credentials{}, false, err
	}
	return c, true, nil
}

// writeSecret creates path (which must not exist) readable by its owner
// only.
func writeSecret(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("nats credentials: %w", err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("nats credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("nats credentials: %w", err)
	}
	return nil
}

// serverAuth fills the users, route credentials and TLS of the embedded
// server of serve or node (listen: its client address, "" for in-process
// only), reading --nats-users, --cluster-creds and the TLS files, or
// making credentials in the data directory.
func (p *process) serverAuth(sc *bus.ServerConfig) error {
	c := p.cfg
	clustered := sc.ClusterListen != "" || sc.ClusterName != ""
	if clustered {
		if c.ClusterCreds == "" {
			return errors.New("a cluster member needs --cluster-creds (user:password the members authenticate their routes with, the same on every member; \"a2abus credentials\" makes one)")
		}
		rc, err := readCredentialsFile(c.ClusterCreds)
		if err != nil {
			return fmt.Errorf("cluster credentials: %w", err)
		}
		sc.ClusterUser, sc.ClusterPassword = rc.User, rc.Password
	}
	tf, err := c.readTLS(true)
	if err != nil {
		return err
	}
	sc.TLS = tf
	if sc.Listen == "" {
		return nil // in-process only: nobody else to authenticate
	}
	if c.NATSUsers != "" {
		if sc.Users, err = readUsersFile(c.NATSUsers); err != nil {
			return err
		}
		p.log.Info("NATS clients need credentials", "users_file", c.NATSUsers, "users", len(sc.Users))
		return nil
	}
	if clustered {
		return errors.New("a cluster member needs --nats-users (the same users on every member; \"a2abus credentials\" makes a set)")
	}
	dir := filepath.Join(c.DataDir, credentialsDir)
	creds, made, err := ensureCredentials(dir)
	if err != nil {
		return err
	}
	for _, role := range bus.Roles {
		sc.Users = append(sc.Users, bus.NATSUser{Name: creds[role].User, Password: creds[role].Password, Role: role})
	}
	p.credsDir = dir
	what := "using the NATS credentials kept"
	switch {
	case len(made) == len(bus.Roles):
		what = "made NATS credentials"
	case len(made) > 0:
		what = "using the NATS credentials kept, and made those of " + joinRoles(made)
	}
	p.log.Info(what+"; other processes join with --nats-creds FILE",
		"edge", filepath.Join(dir, string(bus.RoleEdge)), "edge_admin", filepath.Join(dir, string(bus.RoleAdminEdge)),
		"worker", filepath.Join(dir, string(bus.RoleWorker)), "admin", filepath.Join(dir, string(bus.RoleAdmin)))
	return nil
}

// runCredentials is "a2abus credentials --dir DIR": it makes the
// credentials of a deployment in DIR, keeping those already there, and
// says which file is whose.
func runCredentials(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("a2abus credentials", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("dir", "", "directory to keep the credentials in (made 0700; files 0600)")
	flags.Usage = func() {
		fmt.Fprint(stderr, `Usage: a2abus credentials --dir DIR

Makes the NATS credentials of a deployment, keeping any already in DIR:
  DIR/users.json  the users of the NATS servers (node --nats-users)
  DIR/cluster     route credentials of the cluster (node --cluster-creds)
  DIR/edge        what edges present (edge --nats-creds): reads the agent
                  registry, cannot change it
  DIR/edge-admin  what edges whose admins change the agent registry present
                  (edge --nats-creds, with authentication and --admins)
  DIR/worker      what workers present (worker --nats-creds)
  DIR/admin       everything, for operators (e.g. the nats CLI: --user/--password)
A users.json kept from an earlier run gets the users of the files this run
makes (a role added by a newer release); restart the nodes with it.
`)
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dir == "" || flags.NArg() > 0 {
		flags.Usage()
		return errors.New("credentials needs --dir and nothing else")
	}
	creds, made, err := ensureCredentials(*dir)
	if err != nil {
		return err
	}
	if _, _, err := ensureCredentialsFile(filepath.Join(*dir, "cluster"), "route"); err != nil {
		return err
	}
	usersPath := filepath.Join(*dir, "users.json")
	added, stale, err := ensureUsersFile(usersPath, creds, made)
	if err != nil {
		return err
	}
	files := []string{"users.json", "cluster"}
	for _, role := range bus.Roles {
		files = append(files, string(role))
	}
	fmt.Fprintf(stdout, "NATS credentials in %s: %s\n", *dir, strings.Join(files, ", "))
	if len(added) > 0 {
		fmt.Fprintf(stdout, "added the users of %s (files this run made) to the users.json kept there; restart every node with it (--nats-users %s) before a process presents them\n",
			joinRoles(added), usersPath)
	}
	if len(stale) > 0 {
		fmt.Fprintf(stdout, "warning: the files of %s were made anew, but %s names their users with other passwords: put the new ones there, or remove both to make a matching set\n",
			joinRoles(stale), usersPath)
	}
	return nil
}

// ensureUsersFile writes the users.json of a deployment naming the users
// of creds, or, when one was kept from an earlier run, adds to it the
// users of the roles in made (files made by this run: roles added by a
// newer release) that it does not name, and returns those roles (added).
// Users it names stay as they are, and users an operator removed from it
// stay removed: only a role whose file did not exist is added. stale are
// roles in made whose user it names with another password in clear.
func ensureUsersFile(path string, creds map[bus.Role]bus.Credentials, made []bus.Role) (added, stale []bus.Role, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		var entries []usersFileEntry
		for _, role := range bus.Roles {
			entries = append(entries, usersFileEntry{User: creds[role].User, Password: creds[role].Password, Role: string(role)})
		}
		return nil, nil, writeUsersFile(path, entries, false)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("nats credentials: %w", err)
	}
	var entries []usersFileEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, nil, fmt.Errorf("nats credentials: %s is not a list of users (%w); fix it, or remove it to make a new one", path, err)
	}
	for _, role := range made {
		c := creds[role]
		i := slices.IndexFunc(entries, func(e usersFileEntry) bool { return e.User == c.User })
		switch {
		case i < 0:
			entries = append(entries, usersFileEntry{User: c.User, Password: c.Password, Role: string(role)})
			added = append(added, role)
		case entries[i].Password != "" && entries[i].Password != c.Password:
			stale = append(stale, role)
		}
	}
	if len(added) == 0 {
		return nil, stale, nil
	}
	return added, stale, writeUsersFile(path, entries, true)
}

// writeUsersFile writes entries to path (0600), replacing it (through a
// new file renamed over it, so a reader never sees half of it) when
// replace is set.
func writeUsersFile(path string, entries []usersFileEntry, replace bool) error {
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if !replace {
		return writeSecret(path, b)
	}
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("nats credentials: %w", err)
	}
	if err := writeSecret(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("nats credentials: %w", err)
	}
	return nil
}

// joinRoles names roles for a message: "edge-admin", "edge-admin, worker".
func joinRoles(roles []bus.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
