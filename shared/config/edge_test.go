package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestLoadEdgeFromTheExampleFile(t *testing.T) {
	t.Setenv(FileVar, "../../configs/edge.yaml")
	c, err := LoadEdge()
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8081" || len(c.Backends) != 1 || c.Backends[0] != "127.0.0.1:8080" || c.SoldOutTTL.String() != "5s" {
		t.Fatalf("example file read as %+v", c)
	}
}

func TestLoadEdgeFromTheEnvironment(t *testing.T) {
	t.Setenv("VG_EDGE_BACKENDS", "127.0.0.1:9001,http://127.0.0.1:9002")
	t.Setenv("VG_EDGE_SOLDOUT_TTL", "3s")
	t.Setenv("VG_EDGE_SOLDOUT_REFRESH", "1s")
	c, err := LoadEdge()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Backends) != 2 || c.Backends[1] != "http://127.0.0.1:9002" || c.SoldOutTTL.String() != "3s" {
		t.Fatalf("read as %+v", c)
	}
}

// "off" turns the ops listener off; an empty value, as for every variable with a default,
// takes the default (caarlos0/env), so it cannot.
func TestOpsListenerOff(t *testing.T) {
	for value, want := range map[string]bool{"off": false, "": true, "127.0.0.1:9999": true} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("VG_EDGE_BACKENDS", "127.0.0.1:9001")
			t.Setenv("VG_EDGE_OPS_ADDR", value)
			c, err := LoadEdge()
			if err != nil {
				t.Fatal(err)
			}
			if c.HasOps() != want {
				t.Errorf("VG_EDGE_OPS_ADDR=%q: ops listener %v (addr %q); want %v", value, c.HasOps(), c.OpsAddr, want)
			}
		})
	}
}

func TestEdgeErrorsNameTheVariable(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"VG_EDGE_BACKENDS", "nohost", "VG_EDGE_BACKENDS"},
		{"VG_EDGE_BACKENDS", "ftp://x:1", "VG_EDGE_BACKENDS"},
		{"VG_EDGE_UPSTREAM", "http://x:1/path", "VG_EDGE_UPSTREAM"},
		{"VG_EDGE_ADDR", "8081", "VG_EDGE_ADDR"},
		{"VG_EDGE_SOLDOUT_TTL", "0s", "VG_EDGE_SOLDOUT_TTL"},
		{"VG_EDGE_SOLDOUT_REFRESH", "10s", "VG_EDGE_SOLDOUT_REFRESH"},
		{"VG_EDGE_BACKEND_TIMEOUT", "soon", "VG_EDGE_BACKEND_TIMEOUT"},
		{"VG_MAX_BODY_BYTES", "10", "VG_MAX_BODY_BYTES"},
		{"VG_MAX_HEADER_BYTES", "100", "VG_MAX_HEADER_BYTES"},
		{"VG_EDGE_MAX_CONNS_PER_IP", "-1", "VG_EDGE_MAX_CONNS_PER_IP"},
		{"VG_EDGE_MAX_CLIENT_CONNS", "-1", "VG_EDGE_MAX_CLIENT_CONNS"},
		{"VG_EDGE_BODY_BUDGET_BYTES", "4096", "VG_EDGE_BODY_BUDGET_BYTES"},
		{"VG_EDGE_OPS_ADDR", "9081", "VG_EDGE_OPS_ADDR"},
		{"VG_NATS_PREFIX", "a..b", "VG_NATS_PREFIX"},
		{"VG_NATS_REPLICAS", "0", "VG_NATS_REPLICAS"},
		{"VG_NATS_REPLICAS", "6", "VG_NATS_REPLICAS"},
		{"VG_LOG_FORMAT", "xml", "VG_LOG_FORMAT"},
		{"VG_LOG_LEVEL", "loud", "VG_LOG_LEVEL"},
		{"VG_EDGE_TLS_CERT_FILE", "edge.pem", "VG_EDGE_TLS_KEY_FILE"},
		{"VG_EDGE_TLS_KEY_FILE", "edge-key.pem", "VG_EDGE_TLS_CERT_FILE"},
		{"VG_EDGE_JWT_JWKS_FILE", "jwks.json", "VG_EDGE_JWT_AUDIENCE"},
		{"VG_EDGE_API_KEY", "two words", "VG_EDGE_API_KEY"},
		{"VG_EDGE_JWT_LEEWAY", "later", "VG_EDGE_JWT_LEEWAY"},
		{"VG_EDGE_ANONYMOUS", "yes", "VG_EDGE_ANONYMOUS"},
		{"VG_EDGE_API_KEY", "a-key-and-no-tokens", "VG_EDGE_ANONYMOUS=allow"},
		{"VG_EDGE_SOLDOUT_KEEP", "-1s", "VG_EDGE_SOLDOUT_KEEP"},
		{"VG_EDGE_JWT_JWKS_URL", "http://id.example.com/jwks.json", "VG_EDGE_JWT_JWKS_URL"},
		{"VG_EDGE_JWT_JWKS_URL", "https://id.example.com/jwks.json", "VG_EDGE_JWT_AUDIENCE"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			_, err := LoadEdge()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want one naming %s", err, tt.want)
			}
		})
	}
}

func TestSplitUpstream(t *testing.T) {
	tests := []struct {
		in   string
		addr string
		tls  bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", false},
		{"http://checkout.internal", "checkout.internal:80", false},
		{"https://checkout.internal", "checkout.internal:443", true},
		{"https://checkout.internal:8443/", "checkout.internal:8443", true},
	}
	for _, tt := range tests {
		addr, tls, err := SplitUpstream(tt.in)
		if err != nil || addr != tt.addr || tls != tt.tls {
			t.Errorf("SplitUpstream(%q) = %q, %v, %v; want %q, %v", tt.in, addr, tls, err, tt.addr, tt.tls)
		}
	}
}

// EdgeDefaults are what LoadEdge gives with no VG_ variable set, and they pass the checks.
func TestEdgeDefaultsAreTheLoadedOnes(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "VG_") {
			t.Setenv(name, "") // empty: the default, as unset (caarlos0/env)
		}
	}
	loaded, err := LoadEdge()
	if err != nil {
		t.Fatal(err)
	}
	if d := EdgeDefaults(); !reflect.DeepEqual(d, loaded) {
		t.Fatalf("defaults %+v; loaded with no VG_ variable %+v", d, loaded)
	}
}

// A service key without shoppers' tokens runs only with VG_EDGE_ANONYMOUS=allow; with tokens
// or without a key the variable changes nothing.
func TestEdgeAnonymousWithKey(t *testing.T) {
	for _, tt := range []struct {
		key, jwks, anonymous string
		ok                   bool
	}{
		{"k", "", "", false}, {"k", "", "refuse", false}, {"k", "", "allow", true},
		{"", "", "", true}, {"k", "jwks.json", "", true}, {"", "", "allow", true},
	} {
		c := EdgeDefaults()
		c.APIKey, c.JWTJWKSFile, c.Anonymous = tt.key, tt.jwks, tt.anonymous
		c.JWTAudience, c.JWTIssuer = "aud", "https://id.test/"
		if err := c.Check(); (err == nil) != tt.ok {
			t.Errorf("key %q, JWKS %q, VG_EDGE_ANONYMOUS %q: %v; want ok %v", tt.key, tt.jwks, tt.anonymous, err, tt.ok)
		}
	}
}
