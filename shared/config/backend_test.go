package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cleanEnv unsets the environment's VG_* variables for the test (restored after it), so a
// setting of the machine running the tests cannot change what they read.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "VG_") {
			t.Setenv(k, v)
			os.Unsetenv(k)
		}
	}
}

// useFile writes content to a file the test's VG_CONFIG names, with the environment's VG_*
// variables unset.
func useFile(t *testing.T, content string) {
	t.Helper()
	cleanEnv(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(FileVar, path)
}

func TestLoadBackendDefaultsPassCheck(t *testing.T) {
	cleanEnv(t)
	c, err := LoadBackend()
	if err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if c.Addr != "127.0.0.1:8080" || c.HoldTTL != 15*time.Minute || c.DBTimeout != 2*time.Second ||
		c.ReconcileGrace != time.Minute || c.MaxClockSkew != time.Second || c.QuotaReplicas() != 0 || c.DBMaxConns != 32 || c.QuotaIdemTTL != 168*time.Hour {
		t.Fatalf("defaults read as %+v", c)
	}
}

func TestLoadBackendEnvironmentWinsOverTheFile(t *testing.T) {
	cleanEnv(t)
	t.Setenv(FileVar, "../../configs/backend.yaml")
	t.Setenv("VG_HOLD_TTL", "5m")
	t.Setenv("VG_REDIS_CLUSTER_ADDRS", "127.0.0.1:7000,127.0.0.1:7001")
	c, err := LoadBackend()
	if err != nil {
		t.Fatal(err)
	}
	if c.HoldTTL != 5*time.Minute || c.RequestTimeout != 5*time.Second || len(c.RedisClusterAddrs) != 2 || c.RedisClusterAddrs[1] != "127.0.0.1:7001" {
		t.Fatalf("read as %+v", c)
	}
}

func TestLoadBackendReadsListsFromTheFile(t *testing.T) {
	useFile(t, "VG_REDIS_CLUSTER_ADDRS: [127.0.0.1:7000, 127.0.0.1:7001]\nVG_DB_MAX_CONNS: 4\n")
	c, err := LoadBackend()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RedisClusterAddrs) != 2 || c.RedisClusterAddrs[0] != "127.0.0.1:7000" || c.DBMaxConns != 4 {
		t.Fatalf("read as %+v", c)
	}
}

// LoadBackend refuses what cannot be read and what Check refuses, naming the variable to fix
// and the form it expects.
func TestLoadBackendErrorsNameTheVariable(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"VG_HOLD_TTL": "soon"}, []string{"VG_HOLD_TTL", "duration"}},
		{map[string]string{"VG_DB_MAX_CONNS": "many"}, []string{"VG_DB_MAX_CONNS", "whole number"}},
		{map[string]string{"VG_DB_MAX_CONNS": "0"}, []string{"VG_DB_MAX_CONNS", "at least 1"}},
		{map[string]string{"VG_DB_TIMEOUT": "2s", "VG_RECONCILE_GRACE": "4s"}, []string{"VG_RECONCILE_GRACE", "VG_DB_TIMEOUT"}},
		{map[string]string{"VG_QUOTA_IDEM_TTL": "500ms"}, []string{"VG_QUOTA_IDEM_TTL", "at least 1s"}},
		{map[string]string{"VG_FLASH_KEYS_KEEP": "48h"}, []string{"VG_FLASH_KEYS_KEEP", "0 (keep for good) or at least 49h0m0s", "holdTtl"}},
		{map[string]string{"VG_LOG_FORMAT": "xml"}, []string{"VG_LOG_FORMAT", "text or json"}},
		{map[string]string{"VG_LOG_LEVEL": "loud"}, []string{"VG_LOG_LEVEL", "debug, info, warn or error"}},
		{map[string]string{"VG_MAX_BODY_BYTES": "100"}, []string{"VG_MAX_BODY_BYTES", "at least 256"}},
		{map[string]string{"VG_NATS_REPLICAS": "0"}, []string{"VG_NATS_REPLICAS", "1 (one NATS server) to 5"}},
		{map[string]string{"VG_NATS_REPLICAS": "6"}, []string{"VG_NATS_REPLICAS", "1 (one NATS server) to 5"}},
		{map[string]string{FileVar: "no/such/file.yaml"}, []string{FileVar}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.want, " "), func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := LoadBackend()
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v; want one naming %q", err, w)
				}
			}
		})
	}
}

func TestLoadRefusesAFileThatIsNotAMapping(t *testing.T) {
	useFile(t, "- VG_HOLD_TTL\n- 15m\n")
	if _, err := LoadBackend(); err == nil || !strings.Contains(err.Error(), FileVar) || !strings.Contains(err.Error(), "mapping") {
		t.Fatalf("err = %v; want one naming %s and the expected mapping", err, FileVar)
	}
}

// Check refuses each setting that cannot work, naming its variable, and takes the edge of
// each bound that can.
func TestBackendCheck(t *testing.T) {
	valid := func() Backend {
		return Backend{HoldTTL: 15 * time.Minute, RequestTimeout: 5 * time.Second, DBTimeout: 2 * time.Second,
			RedisTimeout: 300 * time.Millisecond, DBMaxConns: 1, ReconcileGrace: 4*time.Second + time.Millisecond,
			QuotaIdemTTL: time.Second, QuotaRefreshEvery: time.Nanosecond, MaxBodyBytes: 256, MaxHeaderBytes: 1024,
			ShutdownGrace: time.Nanosecond, NATSReplicas: MaxNATSReplicas, APIKeysPoll: 0, /* off */
			QuotaDurability: "replicated", QuotaMinReplicas: 1, QuotaWaitTimeout: 300*time.Millisecond - 1,
			FlashKeysKeep: 49 * time.Hour}
	}
	if err := valid().Check(); err != nil {
		t.Fatalf("settings at each bound's edge: %v", err)
	}
	tests := []struct {
		want string
		edit func(*Backend)
	}{
		{"VG_HOLD_TTL", func(c *Backend) { c.HoldTTL = 0 }},
		{"VG_REQUEST_TIMEOUT", func(c *Backend) { c.RequestTimeout = -time.Second }},
		{"VG_DB_TIMEOUT", func(c *Backend) { c.DBTimeout = 0 }},
		{"VG_REDIS_TIMEOUT", func(c *Backend) { c.RedisTimeout = 0 }},
		{"VG_DB_MAX_CONNS", func(c *Backend) { c.DBMaxConns = 0 }},
		{"VG_NATS_REPLICAS", func(c *Backend) { c.NATSReplicas = 0 }},
		{"VG_NATS_REPLICAS", func(c *Backend) { c.NATSReplicas = MaxNATSReplicas + 1 }},
		{"VG_RECONCILE_GRACE", func(c *Backend) { c.ReconcileGrace = 2 * c.DBTimeout }},
		{"VG_MAX_CLOCK_SKEW", func(c *Backend) { c.MaxClockSkew = -time.Millisecond }},
		{"VG_RECONCILE_GRACE", func(c *Backend) { c.MaxClockSkew = c.ReconcileGrace - 2*c.DBTimeout }},
		{"VG_QUOTA_IDEM_TTL", func(c *Backend) { c.QuotaIdemTTL = time.Second - 1 }},
		{"VG_QUOTA_REFRESH_EVERY", func(c *Backend) { c.QuotaRefreshEvery = 0 }},
		{"VG_QUOTA_DURABILITY", func(c *Backend) { c.QuotaDurability = "sync" }},
		{"VG_QUOTA_MIN_REPLICAS", func(c *Backend) { c.QuotaMinReplicas = 0 }},
		{"VG_QUOTA_WAIT_TIMEOUT", func(c *Backend) { c.QuotaWaitTimeout = c.RedisTimeout }},
		{"VG_QUOTA_WAIT_TIMEOUT", func(c *Backend) { c.QuotaWaitTimeout = time.Millisecond - 1 }},
		{"VG_BACKEND_OPS_ADDR", func(c *Backend) { c.OpsAddr = "9080" }},
		{"VG_API_KEYS_POLL", func(c *Backend) { c.APIKeysPoll = -time.Second }},
		// a day and an hour past the longest hold: a voucher's holdTtl of 24h, or VG_HOLD_TTL above it
		{"VG_FLASH_KEYS_KEEP", func(c *Backend) { c.FlashKeysKeep = 49*time.Hour - 1 }},
		{"VG_FLASH_KEYS_KEEP", func(c *Backend) { c.HoldTTL, c.FlashKeysKeep = 30*time.Hour, 55*time.Hour-1 }},
		{"VG_FLASH_KEYS_KEEP", func(c *Backend) { c.FlashKeysKeep = -time.Hour }},
		{"VG_SHUTDOWN_GRACE", func(c *Backend) { c.ShutdownGrace = 0 }},
		{"VG_MAX_BODY_BYTES", func(c *Backend) { c.MaxBodyBytes = 255 }},
		{"VG_MAX_HEADER_BYTES", func(c *Backend) { c.MaxHeaderBytes = 1023 }},
	}
	for _, tt := range tests {
		c := valid()
		tt.edit(&c)
		if err := c.Check(); err == nil || !strings.HasPrefix(err.Error(), tt.want+" ") {
			t.Errorf("%s out of bounds: err = %v; want one naming it first", tt.want, err)
		}
	}
}
