package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckAddr(t *testing.T) {
	all := Policy{AllowLoopback: true, AllowPrivate: true, AllowLinkLocal: true}
	tests := []struct {
		name   string
		policy Policy
		addr   string
		ok     bool
		hint   string // substring of the refusal
	}{
		{"public v4", Policy{}, "8.8.8.8", true, ""},
		{"public v6", Policy{}, "2606:4700::1111", true, ""},
		{"public v4-mapped", Policy{}, "::ffff:8.8.8.8", true, ""},
		{"public NAT64", Policy{}, "64:ff9b::808:808", true, ""},

		{"loopback v4", Policy{}, "127.0.0.1", false, "(loopback): set allowLoopback in the discovery config"},
		{"loopback v4 other", Policy{}, "127.1.2.3", false, "allowLoopback"},
		{"loopback v6", Policy{}, "::1", false, "allowLoopback"},
		{"loopback v4-mapped", Policy{}, "::ffff:127.0.0.1", false, "(IPv4-mapped 127.0.0.1, loopback)"},
		{"loopback NAT64", Policy{}, "64:ff9b::7f00:1", false, "(NAT64 for 127.0.0.1, loopback)"},
		{"loopback allowed", Policy{AllowLoopback: true}, "127.0.0.1", true, ""},
		{"loopback v6 allowed", Policy{AllowLoopback: true}, "::1", true, ""},
		{"loopback v4-mapped allowed", Policy{AllowLoopback: true}, "::ffff:127.0.0.1", true, ""},

		{"private 10/8", Policy{}, "10.0.0.1", false, "(private network): set allowPrivate"},
		{"private 172.16/12", Policy{}, "172.31.255.254", false, "allowPrivate"},
		{"not private 172.32", Policy{}, "172.32.0.1", true, ""},
		{"private 192.168/16", Policy{}, "192.168.1.1", false, "allowPrivate"},
		{"private ULA", Policy{}, "fd12:3456::1", false, "allowPrivate"},
		{"private site-local", Policy{}, "fec0::1", false, "allowPrivate"},
		{"private local NAT64", Policy{}, "64:ff9b:1::a00:1", false, "allowPrivate"},
		{"CGNAT", Policy{}, "100.64.0.1", false, "(carrier-grade NAT shared address space): set allowPrivate"},
		{"CGNAT top", Policy{}, "100.127.255.254", false, "allowPrivate"},
		{"not CGNAT", Policy{}, "100.128.0.1", true, ""},
		{"NAT64 of private", Policy{}, "64:ff9b::a00:1", false, "64:ff9b::a00:1 (NAT64 for 10.0.0.1, private network)"},
		{"private allowed", Policy{AllowPrivate: true}, "10.0.0.1", true, ""},
		{"CGNAT allowed", Policy{AllowPrivate: true}, "100.64.0.1", true, ""},
		{"NAT64 of private allowed", Policy{AllowPrivate: true}, "64:ff9b::a00:1", true, ""},
		{"private flag is not loopback", Policy{AllowPrivate: true}, "127.0.0.1", false, "allowLoopback"},

		{"link-local v4", Policy{}, "169.254.1.1", false, "(link-local): set allowLinkLocal"},
		{"link-local v6", Policy{}, "fe80::1", false, "allowLinkLocal"},
		{"link-local v6 zone", Policy{}, "fe80::1%eth0", false, "allowLinkLocal"},
		{"link-local allowed", Policy{AllowLinkLocal: true}, "169.254.1.1", true, ""},
		{"link-local v6 zone allowed", Policy{AllowLinkLocal: true}, "fe80::1%eth0", true, ""},

		{"metadata", Policy{}, "169.254.169.254", false, "cloud metadata endpoint"},
		{"metadata, all flags", all, "169.254.169.254", false, "refused even with allowLoopback, allowPrivate or allowLinkLocal; add 169.254.169.254/32 to allow"},
		{"metadata v4-mapped, all flags", all, "::ffff:169.254.169.254", false, "IPv4-mapped 169.254.169.254, cloud metadata"},
		{"metadata NAT64, all flags", all, "64:ff9b::a9fe:a9fe", false, "NAT64 for 169.254.169.254, cloud metadata"},
		{"metadata AWS v6, all flags", all, "fd00:ec2::254", false, "AWS IPv6"},
		{"metadata ECS, all flags", all, "169.254.170.2", false, "ECS"},
		{"metadata Alibaba, all flags", all, "100.100.100.200", false, "Alibaba"},
		{"credentials EKS pod identity, all flags", all, "169.254.170.23", false, "EKS pod identity"},
		{"credentials EKS pod identity v6, all flags", all, "fd00:ec2::23", false, "EKS pod identity credentials, IPv6"},
		{"metadata Google v6, all flags", all, "fd20:ce::254", false, "Google Cloud IPv6"},
		{"metadata Oracle, all flags", all, "192.0.0.192", false, "Oracle Cloud"},
		{"Azure WireServer, all flags", all, "168.63.129.16", false, "Azure"},
		{"other link-local, all flags", all, "169.254.169.253", true, ""},

		{"unspecified v4", all, "0.0.0.0", false, "unspecified"},
		{"this network", all, "0.1.2.3", false, "unspecified"},
		{"unspecified v6", all, "::", false, "unspecified"},
		{"unspecified v4-mapped", all, "::ffff:0.0.0.0", false, "unspecified"},
		{"multicast v4", all, "224.0.0.1", false, "multicast"},
		{"multicast v4 high", all, "239.255.255.250", false, "multicast"},
		{"multicast v6", all, "ff02::1", false, "multicast"},
		{"broadcast", all, "255.255.255.255", false, "broadcast"},

		{"allow wins over loopback", Policy{Allow: pfx("127.0.0.0/8")}, "127.0.0.1", true, ""},
		{"allow is exact", Policy{Allow: pfx("127.0.0.1/32")}, "127.0.0.2", false, "allowLoopback"},
		{"allow wins over private", Policy{Allow: pfx("10.1.0.0/16")}, "10.1.2.3", true, ""},
		{"allow outside its prefix", Policy{Allow: pfx("10.1.0.0/16")}, "10.2.0.1", false, "allowPrivate"},
		{"allow wins over metadata", Policy{Allow: pfx("169.254.169.254/32")}, "169.254.169.254", true, ""},
		{"allow v4 prefix matches v4-mapped", Policy{Allow: pfx("10.0.0.0/8")}, "::ffff:10.0.0.1", true, ""},
		{"allow v4 prefix matches NAT64", Policy{Allow: pfx("10.0.0.0/8")}, "64:ff9b::a00:1", true, ""},
		{"allow v4-mapped prefix matches v4", Policy{Allow: pfx("::ffff:10.0.0.0/104")}, "10.0.0.1", true, ""},
		{"allow NAT64 prefix does not allow what it carries", Policy{Allow: pfx("64:ff9b::/96")}, "64:ff9b::a9fe:a9fe", false, "metadata"},
		{"allow zone ignored", Policy{Allow: pfx("fe80::/10")}, "fe80::1%eth0", true, ""},

		{"deny wins over flags", Policy{AllowLoopback: true, Deny: pfx("127.0.0.0/8")}, "127.0.0.1", false, "(matches deny entry 127.0.0.0/8): remove that entry from deny"},
		{"deny wins over allow", Policy{Allow: pfx("10.0.0.0/8"), Deny: pfx("10.0.0.0/24")}, "10.0.0.1", false, "deny"},
		{"deny public", Policy{Deny: pfx("8.8.8.0/24")}, "8.8.8.8", false, "deny"},
		{"deny v4 matches v4-mapped", Policy{Deny: pfx("8.8.8.0/24")}, "::ffff:8.8.8.8", false, "deny"},
		{"deny v4 matches NAT64", Policy{Deny: pfx("8.8.8.0/24")}, "64:ff9b::808:808", false, "deny"},
		{"deny NAT64 prefix as written", Policy{Deny: pfx("64:ff9b::/96")}, "64:ff9b::808:808", false, "deny"},
		{"deny elsewhere", Policy{Deny: pfx("8.8.4.0/24")}, "8.8.8.8", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckAddr(%s) = %v, want nil", tt.addr, err)
				}
				return
			}
			if !errors.Is(err, ErrForbiddenAddress) {
				t.Fatalf("CheckAddr(%s) = %v, want ErrForbiddenAddress", tt.addr, err)
			}
			if !strings.HasPrefix(err.Error(), "discovery: refusing to connect to ") || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("CheckAddr(%s) = %q, want it to mention %q", tt.addr, err, tt.hint)
			}
		})
	}
}

// names resolves fixed names as a network's DNS would.
type names map[string][]netip.Addr

func (n names) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	if host == "slow.example" {
		<-ctx.Done()
		return nil, &net.DNSError{Err: "i/o timeout", Name: host, Server: "10.0.0.2:53", IsTimeout: true}
	}
	if host == "broken.example" {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, Server: "10.0.0.2:53"}
	}
	if a, ok := n[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.2:53", IsNotFound: true}
}

// CheckResolved judges a host name by every address it resolves to (an
// IPv4-mapped answer as its IPv4 address), refuses one that resolves to
// nothing with ErrUnresolvable and a reason naming no resolver, and
// leaves IP literals to CheckURL.
func TestCheckResolved(t *testing.T) {
	r := names{
		"public.example": {netip.MustParseAddr("203.0.113.5")},
		"mapped.example": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"mixed.example":  {netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("192.168.1.1")},
		"meta.example":   {netip.MustParseAddr("169.254.169.254")},
		"oracle.example": {netip.MustParseAddr("192.0.0.192")},
	}
	all := Policy{AllowLoopback: true, AllowPrivate: true, AllowLinkLocal: true}
	for _, tt := range []struct {
		policy Policy
		url    string
		want   error  // nil: accepted
		says   string // the message contains it
	}{
		{Policy{}, "https://public.example/h", nil, ""},
		{Policy{}, "https://203.0.113.5/h", nil, ""},
		{Policy{}, "https://127.0.0.1/h", ErrForbiddenAddress, "127.0.0.1 (loopback)"},
		{Policy{}, "https://mapped.example/h", ErrForbiddenAddress, "refusing to connect to 127.0.0.1 (loopback)"},
		{Policy{}, "https://mixed.example/h", ErrForbiddenAddress, "192.168.1.1 (private network)"},
		{all, "https://mixed.example/h", nil, ""},
		{all, "https://meta.example/h", ErrForbiddenAddress, "cloud metadata endpoint"},
		{all, "https://oracle.example/h", ErrForbiddenAddress, "Oracle Cloud"},
		{Policy{}, "https://nowhere.example/h", ErrUnresolvable, `"nowhere.example" could not be resolved: it does not exist`},
		{Policy{}, "https://broken.example/h", ErrUnresolvable, "the lookup failed"},
		{Policy{}, "https://slow.example/h", ErrUnresolvable, "the lookup timed out"},
		{Policy{}, "ftp://public.example/h", ErrForbiddenAddress, "scheme"},
	} {
		u, _ := url.Parse(tt.url)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := tt.policy.CheckResolved(ctx, r, u)
		cancel()
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("%s: %v", tt.url, err)
		case tt.want != nil && (!errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says)):
			t.Errorf("%s: %v, want %v saying %q", tt.url, err, tt.want, tt.says)
		case err != nil && strings.Contains(err.Error(), "10.0.0.2"):
			t.Errorf("%s: the error names the resolver: %v", tt.url, err)
		}
	}
}

func TestCheckAddrMessage(t *testing.T) {
	err := Policy{}.CheckAddr(netip.MustParseAddr("127.0.0.1"))
	want := "discovery: refusing to connect to 127.0.0.1 (loopback): set allowLoopback in the discovery config to permit it"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if err := (Policy{}).CheckAddr(netip.Addr{}); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("zero Addr: got %v, want ErrForbiddenAddress", err)
	}
}

func pfx(ss ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range ss {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		policy Policy
		url    string
		ok     bool
		hint   string
	}{
		{Policy{}, "https://agent.example.com/.well-known/agent-card.json", true, ""},
		{Policy{}, "http://agent.example.com:8080/", true, ""},
		{Policy{}, "HTTPS://Agent.Example.com/", true, ""},
		{Policy{}, "https://8.8.8.8/", true, ""},
		{Policy{}, "https://[2606:4700::1111]:443/", true, ""},
		{Policy{}, "http://localhost/", true, ""}, // a name: checked when connecting
		{Policy{RequireHTTPS: true}, "http://agent.example.com/", false, "requireHTTPS"},
		{Policy{RequireHTTPS: true}, "https://agent.example.com/", true, ""},
		{Policy{}, "ftp://agent.example.com/", false, `scheme "ftp" is not allowed`},
		{Policy{}, "file:///etc/passwd", false, `scheme "file"`},
		{Policy{}, "gopher://127.0.0.1:6379/_", false, `scheme "gopher"`},
		{Policy{}, "//agent.example.com/", false, "not an absolute URL"},
		{Policy{}, "/relative", false, "not an absolute URL"},
		{Policy{}, "http:///nohost", false, "names no host"},
		{Policy{}, "http://:80/", false, "names no host"},
		{Policy{}, "http:opaque", false, "names no host"},
		{Policy{}, "https://user:secret@agent.example.com/", false, "user credentials"},
		{Policy{}, "https://agent.example.com@127.0.0.1/", false, "user credentials"},
		{Policy{}, "http://127.0.0.1:8080/", false, "allowLoopback"},
		{Policy{AllowLoopback: true}, "http://127.0.0.1:8080/", true, ""},
		{Policy{}, "http://[::1]/", false, "allowLoopback"},
		{Policy{}, "http://[::ffff:127.0.0.1]/", false, "IPv4-mapped"},
		{Policy{}, "http://10.0.0.1/x", false, "allowPrivate"},
		{Policy{}, "http://169.254.169.254/latest/meta-data", false, "metadata"},
		{Policy{AllowLinkLocal: true}, "http://[::ffff:169.254.169.254]/", false, "metadata"},
		{Policy{}, "http://[fe80::1%25eth0]/", false, "allowLinkLocal"},
		{Policy{}, "http://0.0.0.0:8080/", false, "unspecified"},
		{Policy{}, "http://127.1/", false, "not a canonical IP address"},
		{Policy{}, "http://2130706433/", false, "not a canonical IP address"},
		{Policy{}, "http://0x7f.0.0.1/", false, "not a canonical IP address"},
		{Policy{}, "http://0x7f000001/", false, "not a canonical IP address"},
		{Policy{}, "http://1.2.3.4./", false, "not a canonical IP address"},
		{Policy{}, "http://agent.example.com./", true, ""},
		{Policy{}, "http://1password.com/", true, ""},
		{Policy{}, "http://0xdeadbeef.example/", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.policy.CheckURL(u)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckURL(%s) = %v, want nil", tt.url, err)
				}
				return
			}
			if !errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("CheckURL(%s) = %v, want ErrForbiddenAddress mentioning %q", tt.url, err, tt.hint)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("CheckURL(%s) leaks the password: %v", tt.url, err)
			}
		})
	}
	if err := (Policy{}).CheckURL(nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("CheckURL(nil) = %v", err)
	}
}

// okServer answers 200 "ok" on 127.0.0.1 and counts requests.
func okServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// get fetches u with c under a deadline, so no test can hang.
func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if res != nil {
		t.Cleanup(func() { _ = res.Body.Close() })
	}
	return res, err
}

func wantForbidden(t *testing.T, err error, hint string) {
	t.Helper()
	if err == nil {
		t.Fatalf("request succeeded, want a refusal mentioning %q", hint)
	}
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("error %v (%T) does not wrap ErrForbiddenAddress", err, err)
	}
	if ctxErr := context.DeadlineExceeded; errors.Is(err, ctxErr) {
		t.Fatalf("refusal came from a timeout: %v", err)
	}
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("error %q does not mention %q", err, hint)
	}
}

func TestClientZeroPolicyRefusesLoopback(t *testing.T) {
	srv, hits := okServer(t)
	c := Policy{}.Client(5 * time.Second)
	defer c.CloseIdleConnections()

	// The literal address is refused by CheckURL before dialing.
	_, err := get(t, c, srv.URL)
	wantForbidden(t, err, "set allowLoopback in the discovery config")
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %T is not a *url.Error", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("server saw %d requests, want 0", hits.Load())
	}
}

// The connection-time check, reached directly through Transport: the
// refusal comes from the dialer's Control hook, wrapped in *net.OpError
// and *url.Error, and errors.Is still finds it.
func TestTransportRefusesResolvedAddress(t *testing.T) {
	srv, hits := okServer(t)
	tr := Policy{}.Transport(nil)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	_, err := get(t, c, srv.URL)
	wantForbidden(t, err, "127.0.0.1 (loopback): set allowLoopback")
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("error %v is not a dial *net.OpError", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %T is not a *url.Error", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("server saw %d requests, want 0", hits.Load())
	}
}

func TestTransportIsAClone(t *testing.T) {
	base := &http.Transport{
		Proxy: func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") },
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, fmt.Errorf("must not be used")
		},
		MaxIdleConnsPerHost: 7,
	}
	tr := Policy{}.Transport(base)
	if tr == base {
		t.Fatal("Transport returned base itself")
	}
	if tr.Proxy != nil || tr.DialTLSContext != nil || tr.DialContext == nil {
		t.Fatalf("clone keeps a bypass: Proxy=%v DialTLSContext=%v DialContext=%v", tr.Proxy != nil, tr.DialTLSContext != nil, tr.DialContext != nil)
	}
	if tr.MaxIdleConnsPerHost != 7 {
		t.Fatalf("clone lost base settings: MaxIdleConnsPerHost=%d", tr.MaxIdleConnsPerHost)
	}
	if base.Proxy == nil || base.DialTLSContext == nil || base.DialContext != nil {
		t.Fatal("Transport modified base")
	}
}

// A proxy from the environment is ignored: the request goes straight to
// the destination (and is checked there), never to the proxy.
func TestClientIgnoresEnvironmentProxy(t *testing.T) {
	srv, _ := okServer(t)
	t.Setenv("HTTP_PROXY", "http://192.0.2.1:3128")
	t.Setenv("http_proxy", "http://192.0.2.1:3128")
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	c := Policy{AllowLoopback: true}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	res, err := get(t, c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
}

func TestClientAllowLoopback(t *testing.T) {
	srv, hits := okServer(t)
	c := Policy{AllowLoopback: true}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	res, err := get(t, c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Fatalf("got %d %q", res.StatusCode, b)
	}
	if hits.Load() != 1 {
		t.Fatalf("server saw %d requests, want 1", hits.Load())
	}
}

func TestClientAllowPrefix(t *testing.T) {
	srv, _ := okServer(t)
	c := Policy{Allow: pfx("127.0.0.1/32")}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	if _, err := get(t, c, srv.URL); err != nil {
		t.Fatal(err)
	}
	c = Policy{AllowLoopback: true, Deny: pfx("127.0.0.1/32")}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	_, err := get(t, c, srv.URL)
	wantForbidden(t, err, "deny")
}

func localhostURL(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	addrs, err := net.DefaultResolver.LookupHost(context.Background(), "localhost")
	if err != nil || len(addrs) == 0 {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return "http://localhost:" + port + "/"
}

// A host name passes CheckURL; the address it resolves to is what is
// refused, at connection time.
func TestClientChecksResolvedName(t *testing.T) {
	srv, hits := okServer(t)
	u := localhostURL(t, srv)

	c := Policy{}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	_, err := get(t, c, u)
	wantForbidden(t, err, "(loopback): set allowLoopback")
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v should come from the dialer", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("server saw %d requests, want 0", hits.Load())
	}

	c = Policy{AllowLoopback: true}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	res, err := get(t, c, u)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
}

// redirector answers every request with a redirect to target and counts
// requests.
func redirector(t *testing.T, target string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target, http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestClientRefusesRedirectTargets(t *testing.T) {
	tests := []struct {
		target string
		hint   string
	}{
		{"http://10.0.0.1/x", "10.0.0.1 (private network): set allowPrivate"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254 (cloud metadata endpoint)"},
		{"http://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254 (IPv4-mapped 169.254.169.254, cloud metadata endpoint)"},
		{"http://[64:ff9b::a9fe:a9fe]/", "NAT64 for 169.254.169.254"},
		{"http://0.0.0.0/", "unspecified"},
		{"file:///etc/passwd", `scheme "file"`},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			srv, hits := redirector(t, tt.target)
			// Link-local and private allowed too: metadata is refused anyway.
			p := Policy{AllowLoopback: true}
			if strings.Contains(tt.target, "169.254") {
				p.AllowLinkLocal, p.AllowPrivate = true, true
			}
			c := p.Client(5 * time.Second)
			defer c.CloseIdleConnections()
			start := time.Now()
			_, err := get(t, c, srv.URL)
			wantForbidden(t, err, tt.hint)
			if !strings.Contains(err.Error(), "following redirect") {
				t.Fatalf("error %q should say it came from a redirect", err)
			}
			var oe *net.OpError
			if errors.As(err, &oe) {
				t.Fatalf("redirect target was dialed: %v", err)
			}
			if hits.Load() != 1 {
				t.Fatalf("server saw %d requests, want 1", hits.Load())
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("refusal took %v", d)
			}
		})
	}
}

// A redirect to a host name passes CheckRedirect and is refused when
// dialing, on the address the name resolves to. The redirector listens on
// 127.0.0.2, which the policy allows by prefix; localhost resolves to
// 127.0.0.1 (or ::1), which it does not.
func TestClientChecksResolvedRedirect(t *testing.T) {
	target, targetHits := okServer(t)
	u := localhostURL(t, target)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 here: %v", err)
	}
	var hits atomic.Int64
	srv := &httptest.Server{
		Listener: ln,
		Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, u, http.StatusFound)
		})},
	}
	srv.Start()
	defer srv.Close()

	c := Policy{Allow: pfx("127.0.0.2/32")}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	_, err = get(t, c, srv.URL)
	wantForbidden(t, err, "(loopback): set allowLoopback")
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v should come from the dialer", err)
	}
	if hits.Load() != 1 || targetHits.Load() != 0 {
		t.Fatalf("redirector saw %d requests (want 1), target %d (want 0)", hits.Load(), targetHits.Load())
	}
}

// chain serves /r/N, redirecting to /r/N+1 until N reaches last, which
// answers 200. last < 0 redirects forever.
func chain(t *testing.T, last int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if n == last {
			_, _ = io.WriteString(w, "end")
			return
		}
		http.Redirect(w, r, "/r/"+strconv.Itoa(n+1), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestClientRedirectLimit(t *testing.T) {
	c := Policy{AllowLoopback: true}.Client(5 * time.Second)
	defer c.CloseIdleConnections()

	// Exactly MaxRedirects redirects are followed.
	srv, hits := chain(t, MaxRedirects)
	res, err := get(t, c, srv.URL+"/r/0")
	if err != nil {
		t.Fatalf("%d redirects: %v", MaxRedirects, err)
	}
	if res.StatusCode != http.StatusOK || hits.Load() != MaxRedirects+1 {
		t.Fatalf("status %d after %d requests", res.StatusCode, hits.Load())
	}

	// One more is refused.
	srv, hits = chain(t, -1)
	_, err = get(t, c, srv.URL+"/r/0")
	wantForbidden(t, err, fmt.Sprintf("stopped after %d redirects", MaxRedirects))
	if hits.Load() != MaxRedirects+1 {
		t.Fatalf("server saw %d requests, want %d", hits.Load(), MaxRedirects+1)
	}
}

func mustReq(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestCheckRedirectDowngrade(t *testing.T) {
	check := Policy{}.Client(0).CheckRedirect
	tests := []struct {
		from, to string
		ok       bool
	}{
		{"https://a.example.com/", "http://b.example.com/", false},
		{"https://a.example.com/", "http://a.example.com/", false},
		{"https://a.example.com/", "https://b.example.com/", true},
		{"http://a.example.com/", "https://b.example.com/", true},
		{"http://a.example.com/", "http://b.example.com/", true},
	}
	for _, tt := range tests {
		err := check(mustReq(t, tt.to), []*http.Request{mustReq(t, tt.from)})
		if tt.ok != (err == nil) {
			t.Errorf("%s -> %s: got %v, want ok=%v", tt.from, tt.to, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), "downgrade from https to http")) {
			t.Errorf("%s -> %s: error %v", tt.from, tt.to, err)
		}
	}
	// The downgrade check looks at the hop being followed: http -> https
	// -> http is refused at the second hop.
	err := check(mustReq(t, "http://c.example.com/"), []*http.Request{mustReq(t, "http://a.example.com/"), mustReq(t, "https://b.example.com/")})
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("http -> https -> http: got %v", err)
	}
	// RequireHTTPS refuses an http target from http too.
	err = Policy{RequireHTTPS: true}.Client(0).CheckRedirect(mustReq(t, "http://b.example.com/"), []*http.Request{mustReq(t, "http://a.example.com/")})
	if !errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), "requireHTTPS") {
		t.Errorf("RequireHTTPS: got %v", err)
	}
}

// End to end: a TLS server on loopback redirecting to a plain-http server
// on loopback is refused, and the plain server is never reached.
func TestClientRefusesDowngradeOverTLS(t *testing.T) {
	plain, plainHits := okServer(t)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		}
		if r.URL.Path == "/ok" {
			_, _ = io.WriteString(w, "tls ok")
			return
		}
		http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
	}))
	defer tlsSrv.Close()
	base := defaultTransport()
	base.TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	c := Policy{AllowLoopback: true}.client(5*time.Second, base)
	defer c.CloseIdleConnections()

	res, err := get(t, c, tlsSrv.URL+"/same")
	if err != nil {
		t.Fatalf("https -> https: %v", err)
	}
	if b, _ := io.ReadAll(res.Body); string(b) != "tls ok" {
		t.Fatalf("https -> https: got %q", b)
	}

	_, err = get(t, c, tlsSrv.URL+"/down")
	wantForbidden(t, err, "downgrade from https to http")
	if plainHits.Load() != 0 {
		t.Fatalf("plain server saw %d requests, want 0", plainHits.Load())
	}
}

func TestClientRequireHTTPSChecksFirstRequest(t *testing.T) {
	srv, hits := okServer(t)
	c := Policy{AllowLoopback: true, RequireHTTPS: true}.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	_, err := get(t, c, srv.URL)
	wantForbidden(t, err, "requireHTTPS")
	if hits.Load() != 0 {
		t.Fatalf("server saw %d requests, want 0", hits.Load())
	}
}

// The policy is copied: editing the caller's slices after building a
// client changes nothing (and does not race).
func TestClientCopiesPolicy(t *testing.T) {
	srv, _ := okServer(t)
	p := Policy{Allow: pfx("127.0.0.1/32")}
	c := p.Client(5 * time.Second)
	defer c.CloseIdleConnections()
	p.Allow[0] = netip.MustParsePrefix("192.0.2.0/24")
	if _, err := get(t, c, srv.URL); err != nil {
		t.Fatal(err)
	}
}

// A redirect keeps the caller's headers only within the origin (scheme,
// host and port, the default port written or not, case aside) of the
// first request, and only while the whole chain stayed there; the
// protocol's own headers go everywhere.
func TestCheckRedirectDropsHeadersOffOrigin(t *testing.T) {
	check := Policy{}.Client(0).CheckRedirect
	tests := []struct {
		chain []string // the first request, the hops, and the redirect checked
		keep  bool
	}{
		{[]string{"https://a.example.com/x", "https://a.example.com/y"}, true},
		{[]string{"https://a.example.com/x", "https://A.EXAMPLE.COM:443/y"}, true},
		{[]string{"http://a.example.com/x", "http://a.example.com:80/y"}, true},
		{[]string{"http://a.example.com:8080/x", "http://a.example.com:8081/y"}, false},
		{[]string{"http://a.example.com/x", "https://a.example.com/y"}, false},
		{[]string{"https://a.example.com/x", "https://sub.a.example.com/y"}, false},
		{[]string{"https://a.example.com/x", "https://b.example.com/y"}, false},
		{[]string{"https://a.example.com/x", "https://b.example.com/y", "https://a.example.com/z"}, false},
		{[]string{"https://a.example.com/x", "https://a.example.com/y", "https://a.example.com/z"}, true},
	}
	for _, tt := range tests {
		var via []*http.Request
		for _, u := range tt.chain[:len(tt.chain)-1] {
			via = append(via, mustReq(t, u))
		}
		req := mustReq(t, tt.chain[len(tt.chain)-1])
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("X-Custom-Key", "k")
		req.Header.Set("Referer", via[len(via)-1].URL.String()+"?api_key=k")
		req.Header.Set("User-Agent", UserAgent)
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Last-Event-ID", "7")
		if err := check(req, via); err != nil {
			t.Fatalf("%v: %v", tt.chain, err)
		}
		kept := req.Header.Get("Authorization") != "" && req.Header.Get("X-Custom-Key") != "" && req.Header.Get("Referer") != ""
		dropped := req.Header.Get("Authorization") == "" && req.Header.Get("X-Custom-Key") == "" && req.Header.Get("Referer") == ""
		if (tt.keep && !kept) || (!tt.keep && !dropped) {
			t.Errorf("%v: headers after the check %v, want them kept: %v", tt.chain, req.Header, tt.keep)
		}
		if req.Header.Get("User-Agent") == "" || req.Header.Get("A2A-Version") == "" || req.Header.Get("Last-Event-ID") == "" {
			t.Errorf("%v: a protocol header was dropped: %v", tt.chain, req.Header)
		}
	}
}
