package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// A Redis that is full (maxmemory reached under noeviction) answers PING but refuses every
// write, so every reservation and deduct: /readyz answers 503 naming Redis and why, and
// vouchergate_dependency_up{dependency="redis"} is 0, until Redis takes writes again.
func TestAFullRedisIsNotReady(t *testing.T) {
	srv := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	b := backendtest.Start(t, cfg)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if status, checks := readyz(t, b.OpsURL); status != http.StatusOK || checks["redis"] != "ok" {
		t.Fatalf("/readyz before Redis is full: %d %v; want 200 with redis ok", status, checks)
	}

	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} { // full at once
		if err := rdb.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(t.Context(), cfg.RedisPrefix+"any", "1", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a write to the full Redis: %v; want OOM", err)
	}
	var status int
	var checks map[string]string
	testkit.Eventually(t, "/readyz says Redis refuses writes", func() bool {
		status, checks = readyz(t, b.OpsURL)
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(checks["redis"], "refuses writes") || !strings.Contains(checks["redis"], "OOM") || checks["postgres"] != "ok" {
		t.Errorf("/readyz with Redis full: %d %v; want redis named as refusing writes (OOM), postgres ok", status, checks)
	}
	if up := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics").Value(t, "vouchergate_dependency_up", "dependency", "redis"); up != 0 {
		t.Errorf("vouchergate_dependency_up{redis} = %v with Redis full; want 0", up)
	}

	if err := rdb.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "/readyz is 200 again once Redis takes writes", func() bool {
		status, _ = readyz(t, b.OpsURL)
		return status == http.StatusOK
	})
	if up := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics").Value(t, "vouchergate_dependency_up", "dependency", "redis"); up != 1 {
		t.Errorf("vouchergate_dependency_up{redis} = %v once Redis takes writes; want 1", up)
	}
}

// On Redis Cluster each master has its own memory: whichever master is full, /readyz answers
// 503 naming that master and OOM, and vouchergate_dependency_up{dependency="redis"} is 0,
// while the other masters take their writes; once it takes writes again /readyz is 200.
func TestAFullClusterMasterIsNotReady(t *testing.T) {
	cluster := testkit.StartRedisCluster(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL, cfg.RedisClusterAddrs = "", cluster.Addrs()
	b := backendtest.Start(t, cfg)
	if status, checks := readyz(t, b.OpsURL); status != http.StatusOK || checks["redis"] != "ok" {
		t.Fatalf("/readyz before any master is full: %d %v; want 200 with redis ok", status, checks)
	}
	for _, master := range cluster.Addrs() { // each in turn: the probe must not depend on which
		rdb := redis.NewClient(&redis.Options{Addr: master})
		defer rdb.Close()
		setMaxmemory := func(v string) {
			t.Helper()
			if err := rdb.ConfigSet(t.Context(), "maxmemory", v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		setMaxmemory("1") // noeviction, the cluster's default: full at once
		var status int
		var checks map[string]string
		testkit.Eventually(t, "/readyz says master "+master+" refuses writes", func() bool {
			status, checks = readyz(t, b.OpsURL)
			return status == http.StatusServiceUnavailable
		})
		if !strings.Contains(checks["redis"], "master "+master+": OOM") {
			t.Errorf("/readyz with master %s full: %d %v; want redis naming that master and OOM", master, status, checks)
		}
		for _, other := range cluster.Addrs() {
			if other != master && strings.Contains(checks["redis"], other) {
				t.Errorf("/readyz with master %s full names master %s too: %v", master, other, checks)
			}
		}
		if up := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics").Value(t, "vouchergate_dependency_up", "dependency", "redis"); up != 0 {
			t.Errorf("vouchergate_dependency_up{redis} = %v with master %s full; want 0", up, master)
		}
		setMaxmemory("0")
		testkit.Eventually(t, "/readyz is 200 again once master "+master+" takes writes", func() bool {
			status, checks = readyz(t, b.OpsURL)
			return status == http.StatusOK
		})
	}
}

// readyz asks GET /readyz and returns its status and checks.
func readyz(t *testing.T, base string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("/readyz: %d %s: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, r.Checks
}
