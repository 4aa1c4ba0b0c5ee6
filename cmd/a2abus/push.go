package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/workers"
)

// PushConfig configures push notifications: the config methods of the
// edge, the push senders of serve and worker processes, the keys that
// sign notifications and where webhooks may point.
type PushConfig struct {
	// Enabled serves the push-notification config methods (the cards
	// declare pushNotifications) and, in serve and worker, runs a sender.
	Enabled bool `json:"enabled"`
	// Sender runs a push sender in serve and worker processes when
	// enabled. Default true; false leaves delivery to other processes.
	Sender *bool `json:"sender,omitempty"`
	// KeysFile is the JWK set of private keys notifications are signed
	// with (the first signs; the others stay published for a rotation's
	// overlap): made and rotated by "a2abus push-keys". Re-read when it
	// changes. Required by edge and worker; serve without it signs with a
	// key made at start-up.
	KeysFile string `json:"keysFile,omitempty"`
	// Issuer is the iss of the notifications' tokens, the same in every
	// process (the deployment's public URL, say). Default "a2abus".
	Issuer string `json:"issuer,omitempty"`
	// Timeout bounds one delivery attempt. Default 10s.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxAttempts and MaxAge bound the attempts at one notification
	// before it is dead-lettered. Defaults 10 and 1h.
	MaxAttempts int      `json:"maxAttempts,omitempty"`
	MaxAge      Duration `json:"maxAge,omitempty"`
	// Concurrency bounds the tasks one sender delivers at once. Default 64.
	Concurrency int `json:"concurrency,omitempty"`
	// AllowHTTP accepts http:// webhooks (default: https only).
	AllowHTTP bool `json:"allowHTTP,omitempty"`
	// AllowLoopback and AllowPrivate let webhooks be on loopback, and on
	// private and link-local addresses (metadata addresses never); Allow
	// and Deny are CIDR prefixes overriding both.
	AllowLoopback bool     `json:"allowLoopback,omitempty"`
	AllowPrivate  bool     `json:"allowPrivate,omitempty"`
	Allow         []string `json:"allow,omitempty"`
	Deny          []string `json:"deny,omitempty"`
}

// policy is where webhooks may point: the outbound guard, checked when a
// config is created and on every connection the sender makes.
func (c PushConfig) policy() (discovery.Policy, error) {
	p := discovery.Policy{AllowLoopback: c.AllowLoopback, AllowPrivate: c.AllowPrivate, AllowLinkLocal: c.AllowPrivate, RequireHTTPS: !c.AllowHTTP}
	var err error
	if p.Allow, err = parsePrefixes(c.Allow, "push.allow: %q is not a CIDR prefix"); err != nil {
		return p, err
	}
	p.Deny, err = parsePrefixes(c.Deny, "push.deny: %q is not a CIDR prefix")
	return p, err
}

// parsePrefixes reads a configured list of CIDR prefixes; a bad one is
// refused with wrong (a format with one %q for it).
func parsePrefixes(in []string, wrong string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf(wrong, s)
		}
		out = append(out, pfx)
	}
	return out, nil
}

// webhookResolveTimeout bounds the lookup of a webhook's host name when
// its config is created: the caller waits for it.
const webhookResolveTimeout = 5 * time.Second

// checkWebhook is the edge's check of a new config's URL against policy,
// its host name resolved now with the system's resolver, saying how to
// change what it refuses.
func checkWebhook(p discovery.Policy) func(context.Context, *url.URL) error {
	return checkWebhookWith(p, nil)
}

// checkWebhookWith is checkWebhook resolving with r (nil: the system's).
// A name that resolves to a refused address is refused as the address
// would be (the sender's dial-time check stays: a name may resolve
// elsewhere later); a name that resolves to nothing is refused too, its
// message naming no resolver.
func checkWebhookWith(p discovery.Policy, r discovery.HostResolver) func(context.Context, *url.URL) error {
	return func(ctx context.Context, u *url.URL) error {
		if p.RequireHTTPS && strings.EqualFold(u.Scheme, "http") {
			return errors.New("plain http webhooks are refused here; use https")
		}
		ctx, cancel := context.WithTimeout(ctx, webhookResolveTimeout)
		defer cancel()
		err := p.CheckResolved(ctx, r, u)
		var ue *discovery.UnresolvableError
		switch {
		case errors.As(err, &ue):
			return fmt.Errorf("the webhook's host name %q could not be resolved by this server (%s); use a name that resolves to a public address", ue.Host, ue.Reason)
		case err != nil:
			// The guard's own advice names discovery's settings; say it
			// in push's terms.
			where := "this address"
			if _, perr := netip.ParseAddr(u.Hostname()); perr != nil {
				where = "the address the host name resolves to"
			}
			return fmt.Errorf("the webhook is refused by this server's outbound policy: %s is not allowed (webhooks must be on public addresses; an operator may allow loopback and private ones with --push-allow-private, never cloud metadata addresses)", refusedClass(err, where))
		}
		return nil
	}
}

// addrClass picks the class of a refused address out of the guard's
// message ("refusing to connect to 10.0.0.1 (private): ...").
var addrClass = regexp.MustCompile(`refusing to connect to \S+ \(([a-z -]+)\)`)

// refusedClass names the class of address the guard refused ("a private
// network address"), or says otherwise when the refusal names none.
func refusedClass(err error, otherwise string) string {
	if m := addrClass.FindStringSubmatch(err.Error()); m != nil {
		return "a " + m[1] + " address"
	}
	return otherwise
}

// webhookClient posts notifications: through the outbound guard, which
// checks every address dialled, and never following a redirect (a 3xx is
// a failed attempt).
func webhookClient(p discovery.Policy) *http.Client {
	c := p.Client(0) // each attempt has its own timeout
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Transport = refusalWording{c.Transport}
	return c
}

// refusalWording says a connection the guard refused in push's terms: the
// config's failure state shows it to the task's owner, who has no use for
// discovery's settings.
type refusalWording struct{ next http.RoundTripper }

func (t refusalWording) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if errors.Is(err, discovery.ErrForbiddenAddress) {
		return nil, fmt.Errorf("%w: the webhook resolves to %s, which this server's outbound policy refuses", discovery.ErrForbiddenAddress, refusedClass(err, "its address"))
	}
	return resp, err
}

func (t refusalWording) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// defaultPushIssuer is the iss of notification tokens when --push-issuer
// is not given: a worker knows no public URL of the deployment, and every
// process must sign alike.
const defaultPushIssuer = "a2abus"

// keyring holds the current signing keys, replaced when the key file
// changes (a rotation), so edges publish and sign with the new set
// without a restart.
type keyring = reloaded[auth.SigningKeys]

// pushKeys loads the signing keys of cmd's process.
func (p *process) pushKeys(cmd string) (*keyring, error) {
	c := p.cfg.Push
	if c.KeysFile == "" {
		if cmd != "serve" {
			return nil, errors.New("push notifications need --push-keys FILE in an edge or a worker, the same file in every process (make one with: a2abus push-keys --file FILE)")
		}
		k, err := auth.EphemeralSigningKeys(p.pushIssuer())
		if err != nil {
			return nil, err
		}
		p.log.Info("push notifications are signed with a key made at start-up; use --push-keys FILE for keys that outlive the process")
		return fixed(k), nil
	}
	return p.signingKeys(c.KeysFile, "push notification keys")
}

// signingKeys loads the key file at path, re-read when it changes.
func (p *process) signingKeys(path, what string) (*keyring, error) {
	issuer := p.pushIssuer()
	return loadReloaded(path, what, func(path string) (*auth.SigningKeys, error) { return loadSigningKeys(path, issuer) })
}

// pushIssuer is the iss of notification tokens.
func (p *process) pushIssuer() string {
	if p.cfg.Push.Issuer != "" {
		return p.cfg.Push.Issuer
	}
	return defaultPushIssuer
}

// runsSender reports whether cmd's process delivers notifications.
func (p *process) runsSender(cmd string) bool {
	c := p.cfg.Push
	return c.Enabled && (cmd == "serve" || cmd == "worker") && (c.Sender == nil || *c.Sender)
}

// pushSender is the process's push sender.
func (p *process) pushSender(b *bus.Bus, kr *keyring, pol discovery.Policy) (*workers.PushSender, error) {
	c := p.cfg.Push
	return workers.NewPushSender(b, workers.PushOptions{
		Client: webhookClient(pol),
		Sign: func(n workers.Notification) (string, error) {
			return kr.get().Sign(n.URL, n.TaskID, n.EventID, n.Body, time.Now())
		},
		Timeout:     time.Duration(c.Timeout),
		MaxAttempts: c.MaxAttempts,
		MaxAge:      time.Duration(c.MaxAge),
		Concurrency: c.Concurrency,
		Logger:      p.log,
	})
}

// runPushKeys is "a2abus push-keys": make a key file, or rotate one.
func runPushKeys(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2abus push-keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "the key file to make or rotate (written 0600)")
	alg := fs.String("alg", "EdDSA", "the new key's algorithm: EdDSA (Ed25519) or ES256 (P-256)")
	keep := fs.Int("keep", 2, "keys kept in the file: the new one and the latest before it, still published so tokens they signed verify")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: a2abus push-keys --file FILE [--alg EdDSA|ES256] [--keep N]

Puts a new signing key first in FILE (a JWK set of private keys; made if
missing): processes started with --push-keys FILE sign push notifications
with it, and edges started with --card-keys FILE sign their agent cards
with it, from their next look at the file (every 10s); every edge
publishes the previous keys with it at /.well-known/jwks.json until they
are dropped (--keep). Give every edge and worker the same file.
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("push-keys needs --file and nothing else")
	}
	old, err := os.ReadFile(*file)
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	data, err := auth.RotateSigningKeys(old, *alg, *keep)
	if err != nil {
		return err
	}
	if _, err := auth.ParseSigningKeys(data, "check"); err != nil {
		return err
	}
	tmp := *file + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, *file); err != nil {
		return err
	}
	verb := "rotated"
	if len(old) == 0 {
		verb = "made"
	}
	fmt.Fprintf(stdout, "%s %s: a new %s key signs from now on\n", verb, *file, *alg)
	return nil
}
