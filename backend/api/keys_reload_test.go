package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// The backend command polling its keys file (every 50 ms here) keeps the keys it has when the
// file is emptied or deleted, counts each once (vouchergate_api_key_reloads_total{result}) and
// sets vouchergate_api_keys_stale, which the alert BackendAPIKeysStale reads; a file
// replaced by a rename is then loaded and the gauge cleared.
func TestBackendCommandKeepsItsKeysThroughAnEmptiedOrDeletedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	old := backendtest.APIKey{Name: "old", Secret: secretRead, Scopes: []string{"read"}}
	backendtest.WriteKeys(t, path, old)
	p := backendtest.StartProcess(t, backendtest.Config(t), "VG_API_KEYS_FILE="+path, "VG_API_KEYS_POLL=50ms")
	state := func(key string) int {
		req, err := http.NewRequest("GET", p.URL()+"/vouchers/NONE/state", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", key)
		resp, err := (&http.Client{Timeout: testkit.WaitBound}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	metrics := func() testkit.Metrics { return testkit.ScrapeMetrics(t, p.OpsURL()+"/metrics") }
	reloads := func(result string) float64 {
		return metrics().Count(t, "vouchergate_api_key_reloads_total", "result", result)
	}
	stale := func() float64 { return metrics().Value(t, "vouchergate_api_keys_stale") }
	if stale() != 0 {
		t.Fatal("stale at start")
	}

	if err := os.WriteFile(path, nil, 0o600); err != nil { // emptied in place
		t.Fatal(err)
	}
	testkit.Eventually(t, "the emptied file counted", func() bool { return reloads("empty") == 1 })
	if st := state(old.Secret); st != 200 || stale() != 1 {
		t.Errorf("after the file was emptied: the old key answers %d, stale %v; want 200 and 1", st, stale())
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the deleted file counted", func() bool { return reloads("missing") == 1 })
	if st := state(old.Secret); st != 200 || stale() != 1 {
		t.Errorf("after the file was deleted: the old key answers %d, stale %v; want 200 and 1", st, stale())
	}

	next := backendtest.APIKey{Name: "next", Secret: secretQuota, Scopes: []string{"read"}}
	backendtest.WriteKeys(t, path, next) // by a rename
	testkit.Eventually(t, "the renamed file's key", func() bool { return state(next.Secret) == 200 })
	if st := state(old.Secret); st != 401 || stale() != 0 || reloads("empty") != 1 || reloads("missing") != 1 {
		t.Errorf("after the rename: old key %d, stale %v, empty %v, missing %v; want 401, 0, 1, 1",
			st, stale(), reloads("empty"), reloads("missing"))
	}
}
