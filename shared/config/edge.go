package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"vouchergate/shared/events"
)

// Edge is the edge process's settings.
type Edge struct {
	Addr       string   `env:"VG_EDGE_ADDR" envDefault:"127.0.0.1:8081"`
	Backends   []string `env:"VG_EDGE_BACKENDS" envSeparator:"," envDefault:"127.0.0.1:8080"`
	Upstream   string   `env:"VG_EDGE_UPSTREAM"` // the checkout API; empty: other paths get 404
	NATSURL    string   `env:"VG_NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	NATSPrefix string   `env:"VG_NATS_PREFIX" envDefault:"vouchergate"`
	// NATSReplicas is the sold-out bucket's, used when the edge creates it before any backend
	// has: the backends' setting.
	NATSReplicas int    `env:"VG_NATS_REPLICAS" envDefault:"1"`
	OpsAddr      string `env:"VG_EDGE_OPS_ADDR" envDefault:"127.0.0.1:9081"` // /readyz in full and /metrics; "off": none

	// Client side: reading a request and writing its answer.
	ReadTimeout     time.Duration `env:"VG_EDGE_READ_TIMEOUT" envDefault:"5s"`
	WriteTimeout    time.Duration `env:"VG_EDGE_WRITE_TIMEOUT" envDefault:"5s"`
	IdleTimeout     time.Duration `env:"VG_EDGE_IDLE_TIMEOUT" envDefault:"60s"`
	MaxHeaderBytes  int           `env:"VG_MAX_HEADER_BYTES" envDefault:"8192"`       // shared with the backend: see HeaderLimit
	MaxBodyBytes    int           `env:"VG_EDGE_MAX_BODY_BYTES" envDefault:"1048576"` // any request
	MaxAPIBodyBytes int           `env:"VG_MAX_BODY_BYTES" envDefault:"8192"`         // voucher and quota requests; the backend's limit
	MaxRespBytes    int           `env:"VG_EDGE_MAX_RESPONSE_BYTES" envDefault:"0"`   // a checkout API answer; 0: no cap
	ShutdownGrace   time.Duration `env:"VG_EDGE_SHUTDOWN_GRACE" envDefault:"10s"`

	// What all clients together may hold: connections, and request bodies larger than
	// VG_MAX_BODY_BYTES (checkout uploads). 0 turns a cap off.
	MaxClientConns  int `env:"VG_EDGE_MAX_CLIENT_CONNS" envDefault:"4096"`      // open client connections in all
	MaxConnsPerIP   int `env:"VG_EDGE_MAX_CONNS_PER_IP" envDefault:"512"`       // open connections from one client address
	BodyBudgetBytes int `env:"VG_EDGE_BODY_BUDGET_BYTES" envDefault:"33554432"` // bodies over VG_MAX_BODY_BYTES being read or forwarded, in all

	// Upstream side: each call is bounded as a whole and in each step.
	BackendTimeout  time.Duration `env:"VG_EDGE_BACKEND_TIMEOUT" envDefault:"3s"`
	UpstreamTimeout time.Duration `env:"VG_EDGE_UPSTREAM_TIMEOUT" envDefault:"0s"` // a checkout call in all; 0: none (see the pass-through below)
	DialTimeout     time.Duration `env:"VG_EDGE_DIAL_TIMEOUT" envDefault:"500ms"`
	ConnWait        time.Duration `env:"VG_EDGE_CONN_WAIT" envDefault:"100ms"`
	MaxConns        int           `env:"VG_EDGE_MAX_CONNS" envDefault:"512"`   // per backend, and to the upstream
	WarmConns       int           `env:"VG_EDGE_WARM_CONNS" envDefault:"64"`   // per healthy backend, kept open while idle
	ReserveWait     time.Duration `env:"VG_EDGE_RESERVE_WAIT" envDefault:"1s"` // for a backend slot, when 3/4 of the connections carry reservations

	// Backend pool health.
	HealthEvery   time.Duration `env:"VG_EDGE_HEALTH_EVERY" envDefault:"1s"`
	HealthTimeout time.Duration `env:"VG_EDGE_HEALTH_TIMEOUT" envDefault:"500ms"`
	HealthFalls   int           `env:"VG_EDGE_HEALTH_FALLS" envDefault:"2"`

	// Sold-out cache.
	SoldOutTTL     time.Duration `env:"VG_EDGE_SOLDOUT_TTL" envDefault:"5s"`
	SoldOutRefresh time.Duration `env:"VG_EDGE_SOLDOUT_REFRESH" envDefault:"2s"` // 0: never read ahead
	StateEvery     time.Duration `env:"VG_EDGE_STATE_EVERY" envDefault:"200ms"`  // per voucher
	SyncWait       time.Duration `env:"VG_EDGE_SYNC_WAIT" envDefault:"1s"`

	// The shield without backends: a sold-out entry the NATS state bucket confirms lives this
	// long past the last confirmation (VG_EDGE_SOLDOUT_TTL when that is longer), so it outlasts
	// every backend while NATS is up, and NATS too for this long.
	SoldOutKeep time.Duration `env:"VG_EDGE_SOLDOUT_KEEP" envDefault:"30s"`

	// Shoppers' tokens: off while VG_EDGE_JWT_JWKS_FILE and VG_EDGE_JWT_JWKS_URL are both empty.
	// When on, voucher reservation, confirm and release and the quota paths need a verified
	// bearer token.
	JWTJWKSFile string        `env:"VG_EDGE_JWT_JWKS_FILE"` // a local JWK Set (JSON)
	JWTAlgs     []string      `env:"VG_EDGE_JWT_ALGS" envSeparator:"," envDefault:"RS256,ES256,EdDSA"`
	JWTAudience string        `env:"VG_EDGE_JWT_AUDIENCE"` // required with a JWKS file or URL
	JWTIssuer   string        `env:"VG_EDGE_JWT_ISSUER"`   // required with a JWKS file or URL
	JWTLeeway   time.Duration `env:"VG_EDGE_JWT_LEEWAY" envDefault:"30s"`
	// The token claims that carry a shopper's quota identities other than its subject (USER),
	// TYPE:claim comma-separated (identity_claims.go).
	JWTIdentityClaims string `env:"VG_EDGE_JWT_IDENTITY_CLAIMS"`

	// Shoppers' tokens from an identity provider's JWK Set, fetched over HTTPS, beside or instead
	// of the file: on when set.
	JWTJWKSURL     string        `env:"VG_EDGE_JWT_JWKS_URL"`
	JWTJWKSRefresh time.Duration `env:"VG_EDGE_JWT_JWKS_REFRESH" envDefault:"5m"` // fetched again this often
	JWTJWKSWait    time.Duration `env:"VG_EDGE_JWT_JWKS_WAIT" envDefault:"5s"`    // at start, and each fetch, at most

	// The edge's own service key for the backends: a secret, never logged. Empty: none sent.
	APIKey string `env:"VG_EDGE_API_KEY"`

	// TLS on the public listener: both or neither (PEM files).
	TLSCertFile string `env:"VG_EDGE_TLS_CERT_FILE"`
	TLSKeyFile  string `env:"VG_EDGE_TLS_KEY_FILE"`

	// Anonymous says whether the edge may run with a service key and no shoppers' tokens, where
	// every anonymous request reaches the backends with the key's scopes (anonymous.go).
	Anonymous string `env:"VG_EDGE_ANONYMOUS" envDefault:"refuse"`

	// The pass-through to the checkout API (VG_EDGE_UPSTREAM): how long its idle connections
	// are kept, how long its answers may pause, per path prefix, how large their header may be,
	// what /readyz asks it, and the proxies before the edge whose forwarding headers are kept.
	// Checked by checkPassThrough (edge_passthrough.go).
	UpstreamKeepAlive      time.Duration `env:"VG_EDGE_UPSTREAM_KEEPALIVE" envDefault:"2s"`
	UpstreamReadTimeout    time.Duration `env:"VG_EDGE_UPSTREAM_READ_TIMEOUT" envDefault:"60s"`
	StreamSendTimeout      time.Duration `env:"VG_EDGE_STREAM_SEND_TIMEOUT" envDefault:"60s"` // each write of a streamed answer to the client
	UpstreamTimeouts       string        `env:"VG_EDGE_UPSTREAM_TIMEOUTS"`                    // PREFIX=READ[/TOTAL],...
	UpstreamMaxHeaderBytes int           `env:"VG_EDGE_UPSTREAM_MAX_HEADER_BYTES" envDefault:"65536"`
	UpstreamProbePath      string        `env:"VG_EDGE_UPSTREAM_PROBE_PATH" envDefault:"/"`
	TrustedProxies         []string      `env:"VG_EDGE_TRUSTED_PROXIES" envSeparator:","`
	Log
}

// JWTOn reports whether shoppers' tokens are verified.
func (c Edge) JWTOn() bool { return c.JWTJWKSFile != "" || c.JWTJWKSURL != "" }

// TLSOn reports whether the public listener speaks TLS.
func (c Edge) TLSOn() bool { return c.TLSCertFile != "" }

// ReserveSlots is how many reservations may be at the backends at once: three quarters of the
// connections to them, so that confirms, releases, quota calls and state reads still find one.
func (c Edge) ReserveSlots() int {
	return max(1, c.MaxConns*len(c.Backends)*3/4)
}

// EdgeDefaults is the edge's configuration with every setting at its default: what an
// environment without VG_ variables gives.
func EdgeDefaults() Edge {
	var c Edge
	if err := env.ParseWithOptions(&c, env.Options{Environment: map[string]string{}}); err != nil {
		panic("config: the edge's defaults do not parse: " + err.Error()) // a wrong struct tag
	}
	return c
}

// LoadEdge reads the edge's settings and checks them.
func LoadEdge() (Edge, error) {
	var c Edge
	if err := Load(&c); err != nil {
		return c, err
	}
	return c, c.Check()
}

// Check reports the first setting that cannot work, naming its variable.
func (c Edge) Check() error {
	if err := c.Log.Check(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("VG_EDGE_ADDR is %q; expected host:port such as 127.0.0.1:8081", c.Addr)
	}
	if len(c.Backends) == 0 {
		return fmt.Errorf("VG_EDGE_BACKENDS is empty; expected host:port[,host:port...] such as 127.0.0.1:8080")
	}
	for _, b := range c.Backends {
		if _, _, err := SplitUpstream(b); err != nil {
			return fmt.Errorf("VG_EDGE_BACKENDS has %q: %v", b, err)
		}
	}
	if c.Upstream != "" {
		if _, _, err := SplitUpstream(c.Upstream); err != nil {
			return fmt.Errorf("VG_EDGE_UPSTREAM is %q: %v", c.Upstream, err)
		}
	}
	if err := events.CheckPrefix(c.NATSPrefix); err != nil {
		return fmt.Errorf("VG_NATS_PREFIX: %w", err)
	}
	if c.NATSReplicas < 1 || c.NATSReplicas > MaxNATSReplicas {
		return natsReplicasError(c.NATSReplicas)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"VG_EDGE_READ_TIMEOUT", c.ReadTimeout}, {"VG_EDGE_WRITE_TIMEOUT", c.WriteTimeout},
		{"VG_EDGE_IDLE_TIMEOUT", c.IdleTimeout}, {"VG_EDGE_SHUTDOWN_GRACE", c.ShutdownGrace},
		{"VG_EDGE_BACKEND_TIMEOUT", c.BackendTimeout},
		{"VG_EDGE_DIAL_TIMEOUT", c.DialTimeout}, {"VG_EDGE_HEALTH_EVERY", c.HealthEvery},
		{"VG_EDGE_HEALTH_TIMEOUT", c.HealthTimeout}, {"VG_EDGE_SOLDOUT_TTL", c.SoldOutTTL},
		{"VG_EDGE_STATE_EVERY", c.StateEvery}, {"VG_EDGE_RESERVE_WAIT", c.ReserveWait},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s is %v; expected a positive duration such as 500ms", d.name, d.v)
		}
	}
	switch {
	case c.ConnWait < 0:
		return fmt.Errorf("VG_EDGE_CONN_WAIT is %v; expected 0 (do not wait) or a duration such as 100ms", c.ConnWait)
	case c.SyncWait < 0:
		return fmt.Errorf("VG_EDGE_SYNC_WAIT is %v; expected 0 or a duration such as 1s", c.SyncWait)
	case c.SoldOutKeep < 0:
		return fmt.Errorf("VG_EDGE_SOLDOUT_KEEP is %v; expected a duration such as 30s (0: as VG_EDGE_SOLDOUT_TTL)", c.SoldOutKeep)
	case c.SoldOutRefresh < 0 || c.SoldOutRefresh >= c.SoldOutTTL:
		return fmt.Errorf("VG_EDGE_SOLDOUT_REFRESH is %v; expected 0 (off) or a duration below VG_EDGE_SOLDOUT_TTL (%v)", c.SoldOutRefresh, c.SoldOutTTL)
	case c.MaxConns < 1:
		return fmt.Errorf("VG_EDGE_MAX_CONNS is %d; expected at least 1", c.MaxConns)
	case c.WarmConns < 0 || c.WarmConns > c.MaxConns:
		return fmt.Errorf("VG_EDGE_WARM_CONNS is %d; expected 0 (none) to VG_EDGE_MAX_CONNS (%d)", c.WarmConns, c.MaxConns)
	case c.HealthFalls < 1:
		return fmt.Errorf("VG_EDGE_HEALTH_FALLS is %d; expected at least 1", c.HealthFalls)
	case c.MaxHeaderBytes < minHeaderBytes:
		return fmt.Errorf("%s is %d; expected at least %d", HeaderLimitVar, c.MaxHeaderBytes, minHeaderBytes)
	case c.MaxAPIBodyBytes < 256:
		return fmt.Errorf("VG_MAX_BODY_BYTES is %d; expected at least 256", c.MaxAPIBodyBytes)
	case c.MaxBodyBytes < c.MaxAPIBodyBytes:
		return fmt.Errorf("VG_EDGE_MAX_BODY_BYTES is %d; expected at least VG_MAX_BODY_BYTES (%d)", c.MaxBodyBytes, c.MaxAPIBodyBytes)
	case c.MaxClientConns < 0:
		return fmt.Errorf("VG_EDGE_MAX_CLIENT_CONNS is %d; expected 0 (no cap) or a count such as 4096", c.MaxClientConns)
	case c.MaxConnsPerIP < 0:
		return fmt.Errorf("VG_EDGE_MAX_CONNS_PER_IP is %d; expected 0 (no cap) or a count such as 512", c.MaxConnsPerIP)
	case c.BodyBudgetBytes != 0 && c.BodyBudgetBytes < c.MaxBodyBytes:
		return fmt.Errorf("VG_EDGE_BODY_BUDGET_BYTES is %d; expected 0 (no cap) or at least VG_EDGE_MAX_BODY_BYTES (%d)", c.BodyBudgetBytes, c.MaxBodyBytes)
	case c.HasOps() && !validHostPort(c.OpsAddr):
		return fmt.Errorf("VG_EDGE_OPS_ADDR is %q; expected host:port such as 127.0.0.1:9081, or %q (no ops listener)", c.OpsAddr, OpsOff)
	}
	if err := c.checkPassThrough(); err != nil {
		return err
	}
	if err := c.checkAuth(); err != nil {
		return err
	}
	return c.checkAnonymous()
}

// checkAuth checks the token, service key and TLS settings. The JWKS file and the certificate
// are read, and checked in full, when the edge starts (edge/app).
func (c Edge) checkAuth() error {
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return fmt.Errorf("VG_EDGE_TLS_CERT_FILE and VG_EDGE_TLS_KEY_FILE are set one without the other; expected both (PEM files) or neither")
	case strings.ContainsAny(c.APIKey, " \t\r\n"):
		return fmt.Errorf("VG_EDGE_API_KEY holds white space; expected the key as issued, on one line")
	case !c.JWTOn():
		return nil
	case c.JWTJWKSURL != "" && !httpsURL(c.JWTJWKSURL):
		return fmt.Errorf("VG_EDGE_JWT_JWKS_URL is %q; expected your identity provider's key set over HTTPS, such as https://id.example.com/.well-known/jwks.json", c.JWTJWKSURL)
	case c.JWTJWKSURL != "" && (c.JWTJWKSRefresh < time.Second || c.JWTJWKSWait <= 0):
		return fmt.Errorf("VG_EDGE_JWT_JWKS_REFRESH is %v and VG_EDGE_JWT_JWKS_WAIT %v; expected durations such as 5m (at least 1s) and 5s", c.JWTJWKSRefresh, c.JWTJWKSWait)
	case c.JWTAudience == "":
		return fmt.Errorf("VG_EDGE_JWT_AUDIENCE is empty; expected the audience (aud) your identity provider puts in shoppers' tokens, required with VG_EDGE_JWT_JWKS_FILE or VG_EDGE_JWT_JWKS_URL")
	case c.JWTIssuer == "":
		return fmt.Errorf("VG_EDGE_JWT_ISSUER is empty; expected the issuer (iss) of shoppers' tokens, such as https://id.example.com/, required with VG_EDGE_JWT_JWKS_FILE or VG_EDGE_JWT_JWKS_URL")
	case len(c.JWTAlgs) == 0:
		return fmt.Errorf("VG_EDGE_JWT_ALGS is empty; expected algorithms such as RS256,ES256,EdDSA")
	case c.JWTLeeway < 0 || c.JWTLeeway > 5*time.Minute:
		return fmt.Errorf("VG_EDGE_JWT_LEEWAY is %v; expected a small duration from 0 to 5m such as 30s", c.JWTLeeway)
	}
	_, err := c.IdentityClaims()
	return err
}

// httpsURL reports whether s is an https URL naming a host.
func httpsURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != ""
}

func validHostPort(s string) bool {
	_, _, err := net.SplitHostPort(s)
	return err == nil
}

// SplitUpstream reads "host:port", "http://host:port" or "https://host:port" and returns the
// address to dial and whether to speak TLS.
func SplitUpstream(s string) (addr string, tls bool, err error) {
	if strings.Contains(s, "://") {
		u, parseErr := url.Parse(s)
		if parseErr != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", false, fmt.Errorf("expected host:port or http(s)://host:port with no path")
		}
		switch u.Scheme {
		case "http":
		case "https":
			tls = true
		default:
			return "", false, fmt.Errorf("scheme %q: expected http or https", u.Scheme)
		}
		s = u.Host
		if u.Port() == "" {
			s = net.JoinHostPort(u.Hostname(), map[bool]string{false: "80", true: "443"}[tls])
		}
	}
	host, port, splitErr := net.SplitHostPort(s)
	if splitErr != nil || host == "" || port == "" {
		return "", false, fmt.Errorf("expected host:port or http(s)://host:port")
	}
	return s, tls, nil
}

// OpsOff is the VG_EDGE_OPS_ADDR (or VG_BACKEND_OPS_ADDR) that turns the ops listener off. An empty value cannot: like
// every variable with a default, an empty one takes the default.
const OpsOff = "off"

// HasOps reports whether the edge runs an ops listener.
func (c Edge) HasOps() bool { return c.OpsAddr != "" && c.OpsAddr != OpsOff }

// SoldOutKeepFor is how long a sold-out entry NATS confirmed lives past the confirmation: the
// longer of VG_EDGE_SOLDOUT_KEEP and VG_EDGE_SOLDOUT_TTL.
func (c Edge) SoldOutKeepFor() time.Duration { return max(c.SoldOutKeep, c.SoldOutTTL) }

// StateCheckEvery is how often the edge confirms its watch of the NATS state bucket and renews
// the sold-out entries it confirms: every 2 s, or an eighth of the keep when that is shorter,
// so an entry is renewed many times within its keep, and late checks do not let it lapse.
func (c Edge) StateCheckEvery() time.Duration {
	return max(time.Millisecond, min(2*time.Second, c.SoldOutKeepFor()/8))
}
