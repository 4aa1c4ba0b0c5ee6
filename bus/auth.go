package bus

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/a2abus/a2abus/schemas"
)

// Who may use the bus. The embedded server accepts a network client only
// with the credentials of one of its users (ServerConfig.Users), and each
// user has a role: the subjects it may publish to and subscribe on. The
// roles are NATS subject permissions, so they say which JetStream API
// operations and which message subjects a user may touch, never what a
// message says:
//
//   - RoleAdmin may do anything: the serve process's own in-process
//     connection, operators, and tools (nats CLI) that inspect or repair.
//   - RoleEdge provisions (creates and updates the bus's streams and
//     buckets by name: every edge does it at start-up), reads and writes
//     task records, queues work, publishes task events and cancel notices,
//     follows the task bucket, the agent registry, a task's events and the
//     dead-letter stream with consumers of its own, reads a work consumer's
//     backlog, reads and writes the card cache, and reads and follows the
//     run-time registry (BucketRegistry: maintenance and remote agents,
//     which every edge shows). It dispatches (dispatch.go): takes the
//     dispatch lease, reads the intake with consumers of its own, sees
//     the workers' pull requests and cancel notices, and moves work to
//     the work stream. It cannot delete or purge a stream or
//     bucket, restore or snapshot one, delete or create a consumer of the
//     work stream, take or acknowledge work, register an agent, write to
//     the dead-letter stream, or change the run-time registry: an edge
//     serves the registry's admin API only with RoleAdminEdge.
//   - RoleAdminEdge is RoleEdge plus writing the run-time registry (put,
//     delete and purge its entries): the credentials of edges whose
//     admins change it (--admins, with authentication). The registry is
//     shared by every edge and worker of the bus: an entry puts an agent
//     in maintenance for every caller, or makes serve and worker processes
//     call a URL an admin chose. Whether a caller may do that is decided
//     by the edge it came through (its authentication and --admins), so
//     only edges trusted to decide it get this role; an edge that
//     authenticates no one, or has no admins, runs as RoleEdge and cannot
//     change the registry whatever its callers send (a refused write is
//     ErrNotPermitted at once, not a timeout).
//   - RoleWorker takes work (creates and binds the durable work-<agent>
//     consumers, pulls, acknowledges; it queues work only in the intake,
//     never on the work stream), reads and writes task records,
//     publishes task events, registers agents and refreshes them, receives
//     cancel notices and max-deliveries advisories, moves exhausted work to
//     the dead-letter stream (which reads and deletes that one work
//     message), and does what a fan-out agent does as a client (submit,
//     follow, cancel child tasks) and what a remote agent does (the card
//     cache). It cannot create, update, delete or purge a stream or bucket
//     (workers bind to what an edge provisioned: Config.BindOnly), nor
//     delete a consumer of the work stream.
//
// What NATS permissions cannot scope, and so every edge and worker can do:
//
//   - write any task record: a record is KV key $KV.A2A_TASKS.<id>, and
//     ids are not known in advance, so a writer needs $KV.A2A_TASKS.>.
//     Permissions are blind to headers, so such a writer can also send a
//     KV purge, or a rollup header, on that subject; a rollup of the whole
//     bucket would empty it. The bus purges a record to withdraw a refused
//     task and to sweep finished ones, so the bucket has to allow purges;
//   - see the replies to other clients: every JetStream answer (a KV read,
//     a consumer's messages) goes to the asker's _INBOX.<…> subject, and a
//     client needs _INBOX.> to ask at all. Edges and workers may read the
//     same data directly, so this reveals nothing their role does not;
//   - delete another process's consumer of the events stream, the task
//     bucket or the registry: ephemeral consumer names are random. Their
//     owners replace a lost consumer within seconds by design;
//   - for a worker, act for any agent: create or change any work-<agent>
//     consumer, take and acknowledge any agent's work, register any agent
//     name, delete any work message (when dead-lettering). Scoping a
//     worker to its agents would take one NATS user per agent.
//
// The audit record (StreamAudit) is append-only for every role but admin:
// each publishes records; none updates the stream (an update could shrink
// its bounds and drop records), deletes a message, purges or deletes it.
// An edge may create it when it is missing (provisionAppendOnly).
//
// The roles keep a leaked worker or edge credential from deleting the bus
// (streams, buckets, work consumers), from changing how streams keep
// data, keep an edge from posing as an agent's worker, and keep an edge
// credential other than RoleAdminEdge's from changing the registry every
// edge and worker follows.

// Role is what a NATS user of the bus may do: RoleAdmin, RoleEdge,
// RoleAdminEdge or RoleWorker.
type Role string

// The roles of NATS users; see the comment above.
const (
	RoleAdmin     Role = "admin"
	RoleEdge      Role = "edge"
	RoleAdminEdge Role = "edge-admin"
	RoleWorker    Role = "worker"
)

// Roles lists every role.
var Roles = []Role{RoleAdmin, RoleEdge, RoleAdminEdge, RoleWorker}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	return r == RoleAdmin || r == RoleEdge || r == RoleAdminEdge || r == RoleWorker
}

// NATSUser is one user of the embedded server's client listener.
type NATSUser struct {
	// Name is the user name (no spaces, no ':').
	Name string
	// Password is the password in clear, or its bcrypt hash ("$2a$…",
	// "$2b$…", "$2y$…"), which the server checks as such.
	Password string
	// Role says what the user may do.
	Role Role
}

// ErrBadUsers is returned by StartServer when its users are unusable: an
// empty or duplicated name, no password, an unknown role.
var ErrBadUsers = errors.New("bus: bad NATS users")

// inProcessUser is the user of a server's own in-process connections
// (Connect with Config.Server) when the server has users: an admin that
// only an in-process connection may be, with a password made at start-up
// that never leaves the process.
const inProcessUser = "a2abus-in-process"

// Credentials authenticate a client connection (Config.Credentials). Set
// User and Password, or CredsFile; zero means none.
type Credentials struct {
	// User and Password are a user of the server (see NATSUser).
	User, Password string
	// CredsFile is the path of a NATS .creds file (a user JWT and its nkey
	// seed), for a NATS deployment with decentralized (operator, JWT)
	// authentication. The NATS client reads it at every connect, so it can
	// be replaced in place.
	CredsFile string
}

// ParsePasswordCredentials reads "user:password" (surrounding white space
// ignored), the form of a2abus's credential files.
func ParsePasswordCredentials(s string) (Credentials, error) {
	s = strings.TrimSpace(s)
	user, pass, ok := strings.Cut(s, ":")
	if !ok || user == "" || pass == "" || strings.ContainsAny(user, " \t\r\n") || strings.ContainsAny(pass, "\r\n") {
		return Credentials{}, errors.New(`bus: credentials must be one line "user:password"`)
	}
	return Credentials{User: user, Password: pass}, nil
}

// Line is the "user:password" form ParsePasswordCredentials reads: the
// content of a credentials file, and nothing to print.
func (c Credentials) Line() string { return c.User + ":" + c.Password }

// String names the user and hides the password, so a Credentials (or a
// Config holding one) formatted into a log line or an error leaks nothing.
func (c Credentials) String() string {
	if c.User == "" {
		return ""
	}
	return c.User + ":***"
}

// RedactURLs is a comma-separated NATS URL list fit for an error or a log
// line: a password in a URL (nats://user:pass@host) and a token (a user
// without a password, nats://token@host, which NATS reads as a token) are
// masked, and a URL that does not parse is not repeated.
func RedactURLs(list string) string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil {
			out = append(out, "(unparsable URL)")
			continue
		}
		if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword {
			u.User = url.User("xxxxx")
		}
		out = append(out, u.Redacted())
	}
	return strings.Join(out, ",")
}

// NewPassword returns a random password: 32 hexadecimal digits (128 bits).
func NewPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// TLSFiles are PEM-encoded certificates and keys (the caller reads the
// files; see ServerConfig.TLS and Config.TLS).
type TLSFiles struct {
	// Cert and Key are the certificate (chain) and its private key: a
	// server's, presented to clients and, in a cluster, to other members
	// (so it must be good for both server and client authentication).
	Cert, Key []byte
	// CA is the certificate authority (or a bundle) that clients check a
	// server's certificate against, and that cluster members check each
	// other's against.
	CA []byte
}

func (f *TLSFiles) pool() (*x509.CertPool, error) {
	if len(f.CA) == 0 {
		return nil, nil
	}
	pool, err := CertPool(f.CA)
	if err != nil {
		return nil, fmt.Errorf("bus: the TLS CA %w", err)
	}
	return pool, nil
}

// CertPool reads a PEM bundle of CA certificates, the one way a2abus reads
// a trust bundle (the bus's TLS, the edge's client CA); a bundle without a
// certificate is an error rather than a pool that trusts nothing.
func CertPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("holds no PEM certificate")
	}
	return pool, nil
}

// serverTLS is the TLS configuration of the client listener, and of the
// routes (mutual: each member verifies the other with the CA).
func (f *TLSFiles) serverTLS() (client, route *tls.Config, err error) {
	cert, err := tls.X509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: TLS certificate and key: %w", err)
	}
	pool, err := f.pool()
	if err != nil {
		return nil, nil, err
	}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	route = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, RootCAs: pool}
	if pool != nil {
		route.ClientCAs, route.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return client, route, nil
}

// clientTLS is what a client trusts: the CA, or the system's roots.
func (f *TLSFiles) clientTLS() (*tls.Config, error) {
	pool, err := f.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// serverUsers checks users and turns them into the server's, with their
// roles' permissions, plus the in-process admin (password inProcessPass).
func serverUsers(users []NATSUser, inProcessPass string) ([]*server.User, error) {
	seen := map[string]bool{inProcessUser: true}
	out := make([]*server.User, 0, len(users)+1)
	for i, u := range users {
		switch {
		case u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n:"):
			return nil, fmt.Errorf("%w: user %d has no usable name", ErrBadUsers, i+1)
		case seen[u.Name]:
			return nil, fmt.Errorf("%w: user %q is named twice (or is reserved)", ErrBadUsers, u.Name)
		case u.Password == "":
			return nil, fmt.Errorf("%w: user %q has no password", ErrBadUsers, u.Name)
		case !u.Role.Valid():
			return nil, fmt.Errorf("%w: user %q has role %q; want admin, edge, edge-admin or worker", ErrBadUsers, u.Name, u.Role)
		}
		seen[u.Name] = true
		out = append(out, &server.User{Username: u.Name, Password: u.Password, Permissions: u.Role.permissions()})
	}
	out = append(out, &server.User{Username: inProcessUser, Password: inProcessPass,
		AllowedConnectionTypes: map[string]struct{}{"IN_PROCESS": {}}})
	return out, nil
}

// JetStream subjects the permissions name.
const (
	jsAPIPrefix    = "$JS.API."
	jsFlowControl  = "$JS.FC.>"
	jsAckPrefix    = "$JS.ACK."
	inboxAll       = "_INBOX.>"
	maxDelivsAdvAl = advisoryMaxDelivs + schemas.StreamWork + ".>"
)

// permissions are the role's subject permissions; nil (anything) for
// admin.
func (r Role) permissions() *server.Permissions {
	if r == RoleAdmin || !r.Valid() {
		return nil
	}
	api := func(op string, streams ...string) []string {
		var out []string
		for _, s := range streams {
			out = append(out, jsAPIPrefix+op+"."+s)
		}
		return out
	}
	pub := []string{jsAPIPrefix + "INFO", jsFlowControl}
	pub = append(pub, api("STREAM.INFO", busStreams...)...)
	// Reads of single messages: by the stream leader (reads that decide)
	// or any replica (KV gets; by sequence and by subject).
	pub = append(pub, api("STREAM.MSG.GET", busStreams...)...)
	for _, s := range busStreams {
		pub = append(pub, jsAPIPrefix+"DIRECT.GET."+s, jsAPIPrefix+"DIRECT.GET."+s+".>")
	}
	// Consumers of their own: the create subject may end with the
	// consumer's name and filter, or with nothing (older clients).
	for _, s := range followed {
		pub = append(pub, api("CONSUMER.CREATE", s, s+".>")...)
		pub = append(pub, api("CONSUMER.INFO", s+".*")...)
		pub = append(pub, api("CONSUMER.MSG.NEXT", s+".*")...)
		pub = append(pub, api("CONSUMER.DELETE", s+".*")...)
	}
	// The work stream's backlog, read from its consumers and the
	// intake's.
	pub = append(pub, api("CONSUMER.INFO", schemas.StreamWork+".*", schemas.StreamIntake+".*")...)
	// The work of a task canceled before a worker took it (Cancel
	// withdraws it from the intake, or from the work stream).
	pub = append(pub, api("STREAM.MSG.DELETE", schemas.StreamWork, schemas.StreamIntake)...)
	// What neither may do, whatever is allowed above (deny wins).
	deny := append(api("STREAM.DELETE", ">"), api("STREAM.PURGE", ">")...)
	// The append-only streams (the audit record): no role but admin
	// deletes a message of them or changes them (an update could shrink
	// their bounds, dropping records); an edge may create one that is
	// missing (provisionAppendOnly).
	for _, s := range contract {
		if s.appendOnly {
			deny = append(deny, api("STREAM.UPDATE", s.name())...)
			deny = append(deny, api("STREAM.MSG.DELETE", s.name())...)
		}
	}
	// The messages of the contract's streams and buckets the role writes
	// (contract.go); those of every other one are denied.
	for _, s := range contract {
		if s.writtenBy(r) {
			pub = append(pub, s.subjects()...)
		} else {
			deny = append(deny, s.subjects()...)
		}
	}
	// Cancel notices, to every process running the agent.
	pub = append(pub, schemas.SubjectCancelAll)
	sub := []string{inboxAll}
	deny = append(deny, api("STREAM.RESTORE", ">")...)
	deny = append(deny, api("STREAM.SNAPSHOT", ">")...)
	deny = append(deny, api("CONSUMER.DELETE", schemas.StreamWork+".>")...)
	deny = append(deny, api("STREAM.PEER.REMOVE", ">")...)
	deny = append(deny, jsAPIPrefix+"META.>", jsAPIPrefix+"SERVER.>", jsAPIPrefix+"ACCOUNT.>")

	switch r {
	case RoleEdge, RoleAdminEdge:
		// Provisioning: every edge creates or updates the streams and
		// buckets at start-up, by name.
		pub = append(pub, api("STREAM.CREATE", busStreams...)...)
		pub = append(pub, api("STREAM.UPDATE", busStreams...)...)
		// Nothing of the work stream's consumers beyond their info.
		deny = append(deny, api("CONSUMER.CREATE", schemas.StreamWork, schemas.StreamWork+".>")...)
		deny = append(deny, api("CONSUMER.DURABLE.CREATE", schemas.StreamWork+".>")...)
		deny = append(deny, api("CONSUMER.MSG.NEXT", schemas.StreamWork+".>")...)
		deny = append(deny, jsAckPrefix+schemas.StreamWork+".>")
		// Notifications for remote agents' tasks, to their workers.
		pub = append(pub, schemas.SubjectRemoteAll)
		// Push senders run in workers: nothing of their consumer.
		deny = append(deny, api("CONSUMER.CREATE", schemas.StreamNotify, schemas.StreamNotify+".>")...)
		deny = append(deny, api("CONSUMER.MSG.NEXT", schemas.StreamNotify+".>")...)
		deny = append(deny, jsAckPrefix+schemas.StreamNotify+".>")
		// Dispatch (dispatch.go): the holder of the lease reads the
		// intake with consumers of its own, sees the workers' pull
		// requests, and moves work to the work stream.
		pub = append(pub, api("CONSUMER.CREATE", schemas.StreamIntake, schemas.StreamIntake+".>")...)
		pub = append(pub, api("CONSUMER.DURABLE.CREATE", schemas.StreamIntake+".>")...)
		pub = append(pub, api("CONSUMER.MSG.NEXT", schemas.StreamIntake+".*")...)
		pub = append(pub, api("CONSUMER.DELETE", schemas.StreamIntake+".*")...)
		pub = append(pub, api("CONSUMER.NAMES", schemas.StreamWork)...)
		pub = append(pub, jsAckPrefix+schemas.StreamIntake+".>")
		sub = append(sub, apiNextWork+"*", schemas.SubjectCancelAll)
	case RoleWorker:
		pub = append(pub, api("CONSUMER.CREATE", schemas.StreamWork, schemas.StreamWork+".>")...)
		pub = append(pub, api("CONSUMER.MSG.NEXT", schemas.StreamWork+".*")...)
		pub = append(pub, jsAckPrefix+schemas.StreamWork+".>")
		// The push senders' shared consumer of wake-ups.
		pub = append(pub, api("CONSUMER.CREATE", schemas.StreamNotify, schemas.StreamNotify+".>")...)
		pub = append(pub, api("CONSUMER.INFO", schemas.StreamNotify+".*")...)
		pub = append(pub, api("CONSUMER.MSG.NEXT", schemas.StreamNotify+".*")...)
		pub = append(pub, jsAckPrefix+schemas.StreamNotify+".>")
		sub = append(sub, schemas.SubjectCancelAll, maxDelivsAdvAl, schemas.SubjectRemoteAll)
		deny = append(deny, api("STREAM.CREATE", ">")...)
		deny = append(deny, api("STREAM.UPDATE", ">")...)
	}
	perms := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}
	if r == RoleWorker {
		// A worker answers the requests it takes (a remote agent's
		// notifications): one reply each, to the requester's inbox.
		perms.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	return perms
}
