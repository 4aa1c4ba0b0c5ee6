package discovery

// SSRF guard: every outbound request of the A2A client (card discovery,
// proxying to remote agents) goes through a Policy, which decides which
// destination addresses may be reached. The address rule is applied twice:
// to the URL before a request is sent (CheckURL, also on every redirect
// target), and to the resolved address at the moment the socket connects
// (Transport's dialer Control hook), so host names that resolve to private
// addresses and DNS rebinding are caught too.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// Policy says which destinations outbound requests may reach.
//
// The zero value is safe for a gateway on a public network: public
// destinations only. It refuses loopback, private (RFC 1918, IPv6 ULA,
// carrier-grade NAT) and link-local addresses, and always refuses
// unspecified, multicast and broadcast addresses and the cloud metadata
// endpoints. It permits both http and https, because A2A agents in
// development commonly speak plain http; set RequireHTTPS to refuse http.
//
// The rule for one address, first match wins (see CheckAddr):
//
//  1. Deny: an address inside a Deny prefix is refused.
//  2. Allow: an address inside an Allow prefix is permitted, even if a
//     rule below would refuse it (metadata addresses included).
//  3. Unspecified (0.0.0.0/8, ::), multicast (224.0.0.0/4, ff00::/8),
//     broadcast (255.255.255.255) and the cloud metadata and credential
//     endpoints (169.254.169.254, fd00:ec2::254, 169.254.170.2,
//     169.254.170.23, fd00:ec2::23, fd20:ce::254, 100.100.100.200,
//     168.63.129.16, 192.0.0.192) are refused, whatever the Allow* flags
//     say.
//  4. Loopback (127.0.0.0/8, ::1) is refused unless AllowLoopback.
//  5. Link-local (169.254.0.0/16, fe80::/10) is refused unless
//     AllowLinkLocal.
//  6. Private (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10,
//     fc00::/7, the deprecated site-local fec0::/10 and the local-use
//     NAT64 prefix 64:ff9b:1::/48) is refused unless AllowPrivate.
//  7. Everything else is public and permitted.
//
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) and a NAT64 address
// (64:ff9b::a.b.c.d) are judged by the IPv4 address they carry. Allow is
// matched against that IPv4 address; Deny against both it and the address
// as written. A zone (fe80::1%eth0) is ignored.
//
// The json names are those of the discovery config; error messages refer
// to them.
type Policy struct {
	AllowLoopback  bool           `json:"allowLoopback,omitempty"`  // 127.0.0.0/8, ::1
	AllowPrivate   bool           `json:"allowPrivate,omitempty"`   // 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7
	AllowLinkLocal bool           `json:"allowLinkLocal,omitempty"` // 169.254.0.0/16 (except metadata), fe80::/10
	Allow          []netip.Prefix `json:"allow,omitempty"`          // wins over every refusal except Deny
	Deny           []netip.Prefix `json:"deny,omitempty"`           // always wins
	// RequireHTTPS refuses plain http:// URLs. Independently of it, a
	// redirect from https to http is always refused.
	RequireHTTPS bool `json:"requireHTTPS,omitempty"`
}

// ErrForbiddenAddress is wrapped by every refusal of the guard (errors.Is),
// whether of an address, a URL (scheme, credentials, missing host), a
// redirect (https to http, more than MaxRedirects) or a connection. It is
// not retryable: the same request will be refused again.
var ErrForbiddenAddress = errors.New("discovery: destination refused by the outbound address policy")

// MaxRedirects is how many redirects Policy.Client follows; the next one
// is refused.
const MaxRedirects = 5

// forbiddenError is a refusal with a message for a person; it unwraps to
// ErrForbiddenAddress.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }
func (e *forbiddenError) Unwrap() error { return ErrForbiddenAddress }

func refuse(format string, args ...any) error {
	return &forbiddenError{msg: "discovery: " + fmt.Sprintf(format, args...)}
}

var (
	cgnat         = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork   = netip.MustParsePrefix("0.0.0.0/8")
	siteLocal     = netip.MustParsePrefix("fec0::/10")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48")
	broadcast     = netip.AddrFrom4([4]byte{255, 255, 255, 255})
	metadataAddrs = map[netip.Addr]string{
		netip.MustParseAddr("169.254.169.254"): "cloud metadata endpoint",
		netip.MustParseAddr("fd00:ec2::254"):   "cloud metadata endpoint (AWS IPv6)",
		netip.MustParseAddr("169.254.170.2"):   "cloud metadata endpoint (AWS ECS task credentials)",
		netip.MustParseAddr("169.254.170.23"):  "cloud metadata endpoint (AWS EKS pod identity credentials)",
		netip.MustParseAddr("fd00:ec2::23"):    "cloud metadata endpoint (AWS EKS pod identity credentials, IPv6)",
		netip.MustParseAddr("fd20:ce::254"):    "cloud metadata endpoint (Google Cloud IPv6)",
		netip.MustParseAddr("100.100.100.200"): "cloud metadata endpoint (Alibaba Cloud)",
		netip.MustParseAddr("168.63.129.16"):   "cloud host endpoint (Azure WireServer)",
		netip.MustParseAddr("192.0.0.192"):     "cloud metadata endpoint (Oracle Cloud)",
	}
)

// effective returns the address a connection to ip actually reaches, for
// the purpose of the rule, and a note describing the translation ("" when
// there is none). The zone is dropped.
func effective(ip netip.Addr) (netip.Addr, string) {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		v4 := ip.Unmap()
		return v4, "IPv4-mapped " + v4.String()
	}
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		return v4, "NAT64 for " + v4.String()
	}
	return ip, ""
}

// prefixContains is p.Contains(ip), with an IPv4-mapped prefix
// (::ffff:10.0.0.0/104) treated as the IPv4 prefix it maps and zones
// ignored.
func prefixContains(p netip.Prefix, ip netip.Addr) bool {
	if !p.IsValid() || !ip.IsValid() {
		return false
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Contains(ip.WithZone(""))
}

func firstMatch(ps []netip.Prefix, ips ...netip.Addr) (netip.Prefix, bool) {
	for _, p := range ps {
		for _, ip := range ips {
			if prefixContains(p, ip) {
				return p, true
			}
		}
	}
	return netip.Prefix{}, false
}

// CheckAddr applies the address rule (see Policy) to ip. A refusal wraps
// ErrForbiddenAddress and says how to permit the address, if it can be.
func (p Policy) CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return refuse("refusing to connect to an invalid address")
	}
	eff, note := effective(ip)
	what := func(class string) string {
		if note != "" {
			return ip.String() + " (" + note + ", " + class + ")"
		}
		return ip.String() + " (" + class + ")"
	}
	if d, ok := firstMatch(p.Deny, ip, eff); ok {
		return refuse("refusing to connect to %s: remove that entry from deny in the discovery config to permit it", what("matches deny entry "+d.String()))
	}
	if _, ok := firstMatch(p.Allow, eff); ok {
		return nil
	}
	always := func(class string) error {
		return refuse("refusing to connect to %s: this is refused even with allowLoopback, allowPrivate or allowLinkLocal; add %s to allow in the discovery config only if you really mean to reach it",
			what(class), netip.PrefixFrom(eff, eff.BitLen()))
	}
	switch {
	case eff.IsUnspecified() || thisNetwork.Contains(eff):
		return always("unspecified address")
	case eff == broadcast:
		return always("broadcast address")
	case eff.IsMulticast():
		return always("multicast address")
	}
	if class, ok := metadataAddrs[eff]; ok {
		return always(class)
	}
	switch {
	case eff.IsLoopback():
		if !p.AllowLoopback {
			return refuse("refusing to connect to %s: set allowLoopback in the discovery config to permit it", what("loopback"))
		}
	case eff.IsLinkLocalUnicast():
		if !p.AllowLinkLocal {
			return refuse("refusing to connect to %s: set allowLinkLocal in the discovery config to permit it", what("link-local"))
		}
	case eff.IsPrivate() || cgnat.Contains(eff) || siteLocal.Contains(eff) || nat64Local.Contains(eff):
		if !p.AllowPrivate {
			class := "private network"
			if cgnat.Contains(eff) {
				class = "carrier-grade NAT shared address space"
			}
			return refuse("refusing to connect to %s: set allowPrivate in the discovery config to permit it", what(class))
		}
	}
	return nil
}

// CheckURL checks a URL before a request is sent to it: the scheme must be
// http or https (https only, when RequireHTTPS), the URL must name a host
// and carry no user credentials (they would be sent in clear to whatever
// the URL points at, and "http://trusted@evil/" is a classic disguise;
// A2A authentication belongs in headers). A host that is an IP literal is
// checked with CheckAddr; a host that looks numeric but is not a canonical
// IP address ("127.1", "2130706433", "0x7f.0.0.1") is refused, since
// resolvers disagree about what it means. A host name is otherwise
// permitted here: the address it resolves to is checked when connecting
// (see Transport).
func (p Policy) CheckURL(u *url.URL) error {
	if u == nil {
		return refuse("refusing an empty URL")
	}
	switch {
	case strings.EqualFold(u.Scheme, "https"):
	case strings.EqualFold(u.Scheme, "http"):
		if p.RequireHTTPS {
			return refuse("refusing %s: plain http is refused because requireHTTPS is set in the discovery config; use https", redact(u))
		}
	case u.Scheme == "":
		return refuse("refusing %q: not an absolute URL; use http:// or https://", redact(u))
	default:
		return refuse("refusing %s: scheme %q is not allowed; use http or https", redact(u), u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return refuse("refusing %s: the URL names no host", redact(u))
	}
	if u.User != nil {
		return refuse("refusing %s: the URL carries user credentials; remove them and configure the agent's authentication instead", redact(u))
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(ip)
	}
	if looksNumeric(host) {
		return refuse("refusing %s: host %q is not a canonical IP address or a DNS name", redact(u), host)
	}
	return nil
}

// HostResolver finds the addresses of a host name; *net.Resolver is one.
type HostResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ErrUnresolvable is wrapped by CheckResolved's error (an
// *UnresolvableError) for a host name that resolves to no address.
var ErrUnresolvable = errors.New("discovery: the host name could not be resolved")

// UnresolvableError is a host name that resolved to no address. Its
// message does not name the resolver asked (an address of the network
// this runs in), only what happened.
type UnresolvableError struct {
	Host string
	// Reason is "it does not exist", "the lookup timed out" or "the
	// lookup failed".
	Reason string
}

func (e *UnresolvableError) Error() string {
	return fmt.Sprintf("discovery: the host name %q could not be resolved: %s", e.Host, e.Reason)
}

// Unwrap returns ErrUnresolvable.
func (e *UnresolvableError) Unwrap() error { return ErrUnresolvable }

// CheckResolved is CheckURL and, when the URL's host is a name, the
// address rule applied to every address the name resolves to now (with
// r; net.DefaultResolver when nil): it tells the one who registers a URL
// at once that a request to it would be refused, where the check at
// connect (Transport) tells only whoever later makes the request. It does
// not replace that check: a name may resolve elsewhere later. A refused
// address wraps ErrForbiddenAddress, a name that resolves to nothing (or
// whose lookup fails, or outlasts ctx) ErrUnresolvable; bound the lookup
// with ctx.
func (p Policy) CheckResolved(ctx context.Context, r HostResolver, u *url.URL) error {
	if err := p.CheckURL(u); err != nil {
		return err
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // an IP literal, checked by CheckURL
	}
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		ue := &UnresolvableError{Host: host, Reason: "it does not exist"}
		var de *net.DNSError
		switch {
		case ctx.Err() != nil, errors.As(err, &de) && de.IsTimeout:
			ue.Reason = "the lookup timed out"
		case errors.As(err, &de) && !de.IsNotFound:
			ue.Reason = "the lookup failed"
		}
		return ue
	}
	for _, a := range addrs {
		// A resolver answers an IPv4 address IPv4-mapped: judged the
		// same, said as the address it is.
		if err := p.CheckAddr(a.Unmap()); err != nil {
			return err
		}
	}
	return nil
}

// looksNumeric reports whether host's last label is a number (decimal or
// 0x hex), which the WHATWG URL standard and inet_aton-style resolvers
// read as an IPv4 address in some legacy form; no DNS top-level domain is
// numeric.
func looksNumeric(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if i := strings.LastIndexByte(host, '.'); i >= 0 {
		host = host[i+1:]
	}
	if host == "" {
		return false
	}
	digits := "0123456789"
	if len(host) >= 2 && host[0] == '0' && (host[1] == 'x' || host[1] == 'X') {
		host, digits = host[2:], "0123456789abcdefABCDEF"
	}
	for i := 0; i < len(host); i++ {
		if !strings.ContainsRune(digits, rune(host[i])) {
			return false
		}
	}
	return true
}

// clone returns p with its own copies of Allow and Deny, so a transport
// built from it does not race with a caller that later edits the slices.
func (p Policy) clone() Policy {
	p.Allow = slices.Clone(p.Allow)
	p.Deny = slices.Clone(p.Deny)
	return p
}

// control is the net.Dialer Control hook: it runs after the name was
// resolved and the socket created, before connect, with the very address
// being connected to.
func (p Policy) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return refuse("refusing to connect over %q to %s: only TCP is allowed", network, address)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse("refusing to connect to %q: not an IP address and port", address)
	}
	return p.CheckAddr(ap.Addr())
}

// Transport returns a clone of base (http.DefaultTransport's settings when
// base is nil) whose connections are all checked by the policy: it dials
// through a net.Dialer whose Control hook applies CheckAddr to the actual
// IP address being connected to, after name resolution, so a name that
// resolves to a refused address, or that is rebound to one between
// checks, is refused, and nothing is sent to it. When a name resolves to
// several addresses, the refused ones are skipped and the others tried.
//
// The clone uses no proxy (Proxy is nil, HTTP_PROXY and friends are
// ignored): through a proxy the transport connects to the proxy, which
// resolves and reaches the destination itself, out of the guard's sight.
// The clone's DialContext replaces base's, and base's DialTLSContext,
// DialTLS and Dial are dropped, since they would bypass the check. A
// refusal when connecting is returned wrapped in *net.OpError (and
// *url.Error by http.Client); errors.Is(err, ErrForbiddenAddress) sees
// through both.
func (p Policy) Transport(base *http.Transport) *http.Transport {
	if base == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			base = dt
		} else {
			base = defaultTransport()
		}
	}
	t := base.Clone()
	t.Proxy = nil
	t.OnProxyConnectResponse = nil
	t.DialContext = p.dialer().DialContext
	t.DialTLSContext = nil
	t.DialTLS = nil
	t.Dial = nil
	return t
}

// dialer is the dialer of every connection the policy guards, HTTP
// (Transport) and gRPC (grpc.go): its Control hook applies CheckAddr to
// the IP address being connected to, after name resolution, so nothing is
// sent to a refused address however its name resolves. It has its own
// copy of the policy.
func (p Policy) dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   p.clone().control,
	}
}

// defaultTransport is the base of Policy.Client: timeouts for connecting
// and the TLS handshake, none for the answer, which an agent may take
// long to produce or stream (bound it with the client timeout or the
// request's context).
func defaultTransport() *http.Transport {
	return &http.Transport{
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// Client returns an HTTP client whose every request is guarded: the URL
// of each request, the first one included, is checked with CheckURL; every
// connection is checked on its resolved address (see Transport); and at
// most MaxRedirects redirects are followed, each target checked with
// CheckURL before anything is dialed, a redirect from https to http being
// refused. A redirect away from the origin (scheme, host and port) of the
// first request carries no header but the protocol's own (see
// forwardedHeaders): what Credentials or a configured Header put on the
// request stays with the origin it was meant for, for the rest of the
// chain. timeout is the client's overall timeout (http.Client.Timeout);
// 0 means none, as a streaming call needs. Each call builds a new
// transport with its own connection pool: build the client once and reuse
// it.
func (p Policy) Client(timeout time.Duration) *http.Client {
	return p.client(timeout, defaultTransport())
}

func (p Policy) client(timeout time.Duration, base *http.Transport) *http.Client {
	p = p.clone()
	return &http.Client{
		Transport:     &guardedTransport{policy: p, next: p.Transport(base)},
		CheckRedirect: p.checkRedirect,
		Timeout:       timeout,
	}
}

// checkRedirect is http.Client.CheckRedirect for Client: the one place
// that decides whether a redirect is followed, and what it carries.
func (p Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return refuse("refusing to follow redirect to %s: stopped after %d redirects", redact(req.URL), MaxRedirects)
	}
	if len(via) > 0 {
		prev := via[len(via)-1].URL
		if prev != nil && req.URL != nil && strings.EqualFold(prev.Scheme, "https") && !strings.EqualFold(req.URL.Scheme, "https") {
			return refuse("refusing to follow redirect from %s to %s: downgrade from https to %s", redact(prev), redact(req.URL), req.URL.Scheme)
		}
	}
	if err := p.CheckURL(req.URL); err != nil {
		return fmt.Errorf("following redirect: %w", err)
	}
	if leftOrigin(req, via) {
		dropUnforwarded(req.Header)
	}
	return nil
}

// forwardedHeaders are the headers a redirect to another origin keeps:
// those discovery itself sets to speak the protocol. Anything else on a
// request came from its caller — Credentials (an Authorization header, an
// API key in whatever header the card or the configuration names, a
// cookie), Options.Header or Fetcher.Header — or from net/http's Referer,
// which repeats the previous URL and so an API key sent in its query.
// (http.Client itself strips only Authorization, WWW-Authenticate and
// cookies, and keeps even those for another port of the same host or a
// subdomain.)
var forwardedHeaders = []string{"Accept", "Content-Type", "User-Agent", schemas.HeaderA2AVersion, "Last-Event-ID", "If-None-Match"}

// dropUnforwarded removes from h every header not in forwardedHeaders.
func dropUnforwarded(h http.Header) {
	for k := range h {
		if !slices.ContainsFunc(forwardedHeaders, func(f string) bool { return strings.EqualFold(f, k) }) {
			delete(h, k)
		}
	}
}

// leftOrigin reports whether a redirect chain, up to and including req,
// has been anywhere but the origin of its first request. Once it has, it
// stays left: a host that was not trusted with the credentials must not be
// able to bounce the request back to the first origin and have them put on
// again (http.Client copies the first request's headers onto every hop).
func leftOrigin(req *http.Request, via []*http.Request) bool {
	if len(via) == 0 {
		return false
	}
	first := origin(via[0].URL)
	for _, r := range via[1:] {
		if origin(r.URL) != first {
			return true
		}
	}
	return origin(req.URL) != first
}

// origin is a URL's scheme, host and port, in one comparable form: case
// folded, the scheme's default port written out.
func origin(u *url.URL) string {
	if u == nil {
		return ""
	}
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// guardedTransport checks each request's URL before handing it to the
// guarded *http.Transport. It is the transport of every client a2abus
// calls out with (remote agents, fan-out and router children elsewhere,
// the llm and langgraph kinds' APIs, MCP servers, push webhooks), so it
// is where a request made under a span gets its client span and carries
// the trace context (tracing.StartHTTPClient).
type guardedTransport struct {
	policy Policy
	next   *http.Transport
}

func (g *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.policy.CheckURL(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	req, end := tracing.StartHTTPClient(req)
	res, err := g.next.RoundTrip(req)
	end(res, err)
	return res, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// pool.
func (g *guardedTransport) CloseIdleConnections() { g.next.CloseIdleConnections() }
