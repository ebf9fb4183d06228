package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"vouchergate/backend/api"
	"vouchergate/backend/apikeys"
	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// Test keys, long random-looking secrets as an operator would make them.
const (
	secretReserve = "vg-test-reserve-6f1c0d9a27b84e55b3f0a1c2d3e4f506"
	secretQuota   = "vg-test-quota-0a9b8c7d6e5f40312a3b4c5d6e7f8091"
	secretRead    = "vg-test-read-1b2c3d4e5f60718293a4b5c6d7e8f901"
	secretEdge    = "vg-test-edge-9e8d7c6b5a4f30211f2e3d4c5b6a7980"
)

// testKeys are a checkout (reserve), a quota service, a reader, and an edge (every scope).
var testKeys = []backendtest.APIKey{
	{Name: "checkout", Secret: secretReserve, Scopes: []string{"reserve"}},
	{Name: "quotas", Secret: secretQuota, Scopes: []string{"quota"}},
	{Name: "reader", Secret: secretRead, Scopes: []string{"read"}},
	{Name: "edge", Secret: secretEdge, Scopes: []string{"reserve", "quota", "read", "edge"}},
}

// startWithKeys boots a backend whose keys file holds keys, and returns it with the file's path.
func startWithKeys(t *testing.T, keys ...backendtest.APIKey) (*backendtest.Backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	backendtest.WriteKeys(t, path, keys...)
	cfg := backendtest.Config(t)
	cfg.APIKeysFile = path
	return backendtest.Start(t, cfg), path
}

// keyed is one request sent with a service key (none if secret is "") and optionally a subject.
type keyed struct {
	method, uri, body string
	secret, subject   string
}

// send sends r to b and returns the status, the error code of the answer ("" for none) and its
// WWW-Authenticate.
func (r keyed) send(t *testing.T, b *backendtest.Backend) (int, string, string) {
	t.Helper()
	h := map[string]string{}
	if r.secret != "" {
		h["X-API-Key"] = r.secret
	}
	if r.subject != "" {
		h[api.SubjectHeader] = r.subject
	}
	var body any
	if r.body != "" {
		body = r.body
	}
	status, got, hdr := b.DoWithHeaders(t, r.method, r.uri, body, h)
	var e struct{ Error string }
	_ = json.Unmarshal(got, &e)
	return status, e.Error, string(hdr.Peek("WWW-Authenticate"))
}

// routeRequests is a request for each route that needs a key; its answer without keys says
// nothing here, only whether the key check let it through.
var routeRequests = map[api.Endpoint]keyed{
	{Method: "POST", Path: "/vouchers/{code}/reservations"}: {method: "POST", uri: "/vouchers/KEYS/reservations",
		body: `{"customerId":"c1","orderId":"o-1","orderAmount":100}`},
	{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/confirm"}: {method: "POST", uri: "/vouchers/KEYS/reservations/o-1/confirm"},
	{Method: "DELETE", Path: "/vouchers/{code}/reservations/{orderId}"}:       {method: "DELETE", uri: "/vouchers/KEYS/reservations/o-2"},
	{Method: "POST", Path: "/vouchers/{code}/reservations/{orderId}/refund"}:  {method: "POST", uri: "/vouchers/KEYS/reservations/o-3/refund"},
	{Method: "GET", Path: "/vouchers/{code}/state"}:                           {method: "GET", uri: "/vouchers/KEYS/state"},
	{Method: "POST", Path: "/quotas/deduct"}: {method: "POST", uri: "/quotas/deduct",
		body: `{"bizId":1,"idemKey":"k1","items":[{"identityType":"USER","identity":"u1","dimensions":["ITEM:1"]}]}`},
	{Method: "POST", Path: "/quotas/rollback"}: {method: "POST", uri: "/quotas/rollback", body: `{"bizId":1,"idemKey":"k1"}`},
	{Method: "POST", Path: "/vouchers/{code}/validate"}: {method: "POST", uri: "/vouchers/KEYS/validate",
		body: `{"customerId":"c1","orderId":"o-9","orderAmount":100}`},
	{Method: "POST", Path: "/quotas/check"}: {method: "POST", uri: "/quotas/check",
		body: `{"bizId":1,"idemKey":"k9","items":[{"identityType":"USER","identity":"u1","dimensions":["ITEM:1"]}]}`},
	{Method: "GET", Path: "/quotas/usage"}: {method: "GET", uri: "/quotas/usage?bizId=1&identityType=USER&identity=u1"},
	{Method: "POST", Path: "/quotas/ops"}: {method: "POST", uri: "/quotas/ops",
		body: `{"bizId":1,"opType":1,"idemKey":"k8","opItems":[{"userInfoType":1,"userInfoId":"u1","dimensions":["T_GAME"],"expireTime":0,"opNum":1}]}`},
}

// Every public route needs a key with one of its scopes: no key or an unknown one is a 401
// asking for one, a key without the scope a 403; the probes and metrics need none, and /admin
// takes its token, never a key. Each refusal is counted by reason.
func TestEachRouteNeedsAKeyWithItsScope(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	refusals := map[string]float64{} // what the metric must count, by reason
	for _, e := range api.Routes() {
		scopes := api.ScopesOf(e)
		switch {
		case strings.HasPrefix(e.Path, "/admin/"):
			if scopes != 0 {
				t.Errorf("%s %s: an admin route with scopes %v; /admin takes the admin token only", e.Method, e.Path, scopes)
			}
			continue
		case e.Path == "/healthz" || e.Path == "/readyz":
			if scopes != 0 {
				t.Errorf("%s %s needs scopes %v; probes need none", e.Method, e.Path, scopes)
			}
			if st, code, _ := (keyed{method: e.Method, uri: e.Path}).send(t, b); st == 401 || st == 403 {
				t.Errorf("%s %s without a key: %d %s", e.Method, e.Path, st, code)
			}
			continue
		}
		r, ok := routeRequests[e]
		if !ok || scopes == 0 {
			t.Fatalf("%s %s (scopes %v): every public route needs scopes and a request in routeRequests", e.Method, e.Path, scopes)
		}
		for _, k := range append(testKeys, backendtest.APIKey{Name: "none"}, backendtest.APIKey{Name: "unknown", Secret: "vg-test-nobody-0000000000000000"}) {
			t.Run(e.Method+" "+e.Path+" with "+k.Name, func(t *testing.T) {
				r := r
				r.secret = k.Secret
				st, code, auth := r.send(t, b)
				var has apikeys.Scope
				for _, tk := range testKeys {
					if tk.Secret == k.Secret {
						has = scopeOf(tk.Scopes)
					}
				}
				switch {
				case k.Secret == "":
					refusals["missing"]++
				case has == 0:
					refusals["unknown"]++
				case has&scopes == 0:
					refusals["scope"]++
				}
				switch {
				case k.Secret == "" || has == 0:
					if st != 401 || code != "UNAUTHORIZED" || !strings.HasPrefix(auth, "Bearer") {
						t.Errorf("%d %s, WWW-Authenticate %q; want 401 UNAUTHORIZED asking for a Bearer key", st, code, auth)
					}
				case has&scopes == 0:
					if st != 403 || code != "FORBIDDEN" || auth != "" {
						t.Errorf("%d %s, WWW-Authenticate %q; want 403 FORBIDDEN", st, code, auth)
					}
				default:
					if st == 401 || st == 403 || code == "UNAUTHORIZED" || code == "FORBIDDEN" {
						t.Errorf("%d %s; want the route's own answer", st, code)
					}
				}
			})
		}
	}
	// a service key is not the admin token, even with every scope
	if st, code, _ := (keyed{method: "GET", uri: "/admin/vouchers"}).sendAuthorization(t, b, "Bearer "+secretEdge); st != 401 {
		t.Errorf("an admin path with a service key: %d %s; want 401", st, code)
	}

	m := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	for reason, want := range refusals {
		if got := m.Value(t, "vouchergate_api_key_refusals_total", "reason", reason); got != want {
			t.Errorf("refusals for %s: %v; want %v", reason, got, want)
		}
	}
	if got := m.Value(t, "vouchergate_http_requests_total", "route", "reserve", "status", "401", "code", "UNAUTHORIZED"); got != 2 {
		t.Errorf("reserve's 401s counted %v; want 2", got)
	}
}

func scopeOf(names []string) apikeys.Scope {
	var s apikeys.Scope
	for _, n := range names {
		for _, sc := range []apikeys.Scope{apikeys.Reserve, apikeys.Quota, apikeys.Read, apikeys.Edge} {
			if sc.String() == n {
				s |= sc
			}
		}
	}
	return s
}

// sendAuthorization sends r with the Authorization header given instead of X-API-Key.
func (r keyed) sendAuthorization(t *testing.T, b *backendtest.Backend, authorization string) (int, string, string) {
	t.Helper()
	var body any
	if r.body != "" {
		body = r.body
	}
	status, got, hdr := b.DoWithHeaders(t, r.method, r.uri, body, map[string]string{"Authorization": authorization})
	var e struct{ Error string }
	_ = json.Unmarshal(got, &e)
	return status, e.Error, string(hdr.Peek("WWW-Authenticate"))
}

// The key may come as Authorization: Bearer (any case of "Bearer") or X-API-Key; X-API-Key is
// read first, so a caller may forward an end user's own bearer token beside its key.
func TestBothKeyHeaders(t *testing.T) {
	b, _ := startWithKeys(t, testKeys...)
	state := keyed{method: "GET", uri: "/vouchers/NONE/state"}
	for _, auth := range []string{"Bearer " + secretRead, "bearer " + secretRead, "BEARER  " + secretRead} {
		if st, code, _ := state.sendAuthorization(t, b, auth); st != 200 {
			t.Errorf("Authorization %q: %d %s; want the route's 200", auth[:8], st, code)
		}
	}
	for _, auth := range []string{"Basic " + secretRead, secretRead, "Bearer"} {
		if st, code, _ := state.sendAuthorization(t, b, auth); st != 401 || code != "UNAUTHORIZED" {
			t.Errorf("Authorization %q…: %d %s; want 401", auth[:5], st, code)
		}
	}
	st, _, _ := b.DoWithHeaders(t, "GET", "/vouchers/NONE/state", nil,
		map[string]string{"X-API-Key": secretRead, "Authorization": "Bearer eyJhbGciOiJFUzI1NiJ9.user.token"})
	if st != 200 {
		t.Errorf("X-API-Key beside an end user's bearer token: %d; want the route's 200", st)
	}
}

// A rotated keys file is used without a restart: the backend notices the change on its own (and
// on ReloadKeys, SIGHUP's call); the old key stops working; a file that does not parse leaves the
// keys as they were.
func TestKeysRotateWithoutRestart(t *testing.T) {
	old := backendtest.APIKey{Name: "checkout", Secret: secretReserve, Scopes: []string{"reserve", "read"}}
	b, path := startWithKeys(t, old)
	newKey := backendtest.APIKey{Name: "checkout-2", Secret: "vg-test-rotated-5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a", Scopes: []string{"read"}}
	stateWith := func(secret string) int {
		st, _, _ := (keyed{method: "GET", uri: "/vouchers/NONE/state", secret: secret}).send(t, b)
		return st
	}
	if st := stateWith(old.Secret); st != 200 {
		t.Fatalf("old key before rotation: %d", st)
	}

	backendtest.WriteKeys(t, path, newKey) // the file changes; nobody tells the backend
	testkit.Eventually(t, "the rotated key to be taken", func() bool { return stateWith(newKey.Secret) == 200 })
	if st := stateWith(old.Secret); st != 401 {
		t.Errorf("old key after rotation: %d; want 401", st)
	}

	testkit.ReplaceFile(t, path, "keys: [{name: broken\n")
	if err := b.App.ReloadKeys(); err == nil {
		t.Error("ReloadKeys of a bad file: no error")
	}
	if st := stateWith(newKey.Secret); st != 200 {
		t.Errorf("after a bad file, the key loaded before: %d; want it kept (200)", st)
	}

	third := backendtest.APIKey{Name: "third", Secret: "vg-test-third-00112233445566778899aabbccddeeff", Scopes: []string{"read"}}
	backendtest.WriteKeys(t, path, third)
	if err := b.App.ReloadKeys(); err != nil {
		t.Fatal(err)
	}
	if st := stateWith(third.Secret); st != 200 {
		t.Errorf("key loaded by ReloadKeys: %d; want 200", st)
	}
	if st := stateWith(newKey.Secret); st != 401 {
		t.Errorf("key rotated out by ReloadKeys: %d; want 401", st)
	}
	m := testkit.ScrapeMetrics(t, b.OpsURL+"/metrics")
	// the poller may take the third file before ReloadKeys does, which then loads it again
	if got := m.Value(t, "vouchergate_api_key_reloads_total", "result", "loaded"); got < 2 || got > 3 {
		t.Errorf("reloads loaded: %v; want 2 or 3 (the watched change, the third file)", got)
	}
	if got := m.Value(t, "vouchergate_api_key_reloads_total", "result", "refused"); got < 1 {
		t.Errorf("reloads refused: %v; want the bad file counted", got)
	}
	if got := m.Value(t, "vouchergate_api_keys"); got != 1 {
		t.Errorf("keys loaded: %v; want 1", got)
	}
}

// A keys file that is missing or does not parse stops the backend at start, naming the
// variable: it must not serve with keys other than the operator wrote.
func TestABadKeysFileStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	testkit.ReplaceFile(t, bad, "keys:\n  - name: a\n    sha256: abc\n    scopes: [read]\n")
	for _, path := range []string{bad, filepath.Join(dir, "missing.yaml")} {
		cfg := backendtest.Config(t)
		cfg.APIKeysFile = path
		a, err := app.New(context.Background(), cfg)
		if err == nil {
			a.Close()
			t.Errorf("%s: the backend started", path)
			continue
		}
		if !strings.Contains(err.Error(), "VG_API_KEYS_FILE") {
			t.Errorf("%s: error %q does not name VG_API_KEYS_FILE", path, err)
		}
	}
}

// The backend command reloads its keys on SIGHUP (and survives it), and writes no key to its
// output, neither those it loads nor those it refuses nor one inside a file it cannot parse.
// Polling is off (VG_API_KEYS_POLL=0), so only the signal can make it read the file again.
func TestBackendCommandReloadsKeysOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	old := backendtest.APIKey{Name: "old", Secret: secretRead, Scopes: []string{"read"}}
	backendtest.WriteKeys(t, path, old)
	p := backendtest.StartProcess(t, backendtest.Config(t), "VG_API_KEYS_FILE="+path, "VG_API_KEYS_POLL=0")
	stateWith := func(header, value string) int {
		req, err := http.NewRequest("GET", p.URL()+"/vouchers/NONE/state", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(header, value)
		resp, err := (&http.Client{Timeout: testkit.WaitBound}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	reloads := func(result string) float64 {
		return testkit.ScrapeMetrics(t, p.OpsURL()+"/metrics").Count(t, "vouchergate_api_key_reloads_total", "result", result)
	}
	if st := stateWith("X-API-Key", old.Secret); st != 200 {
		t.Fatalf("key of the file at start: %d", st)
	}
	if st := stateWith("Authorization", "Bearer "+old.Secret); st != 200 {
		t.Fatalf("key of the file at start, as a bearer token: %d", st)
	}
	if st := stateWith("X-API-Key", "vg-test-guess-0000"); st != 401 {
		t.Fatalf("unknown key: %d", st)
	}
	loadedBefore := reloads("loaded")

	next := backendtest.APIKey{Name: "next", Secret: secretQuota, Scopes: []string{"read"}}
	backendtest.WriteKeys(t, path, next)
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, "the key of the rewritten file", func() bool { return stateWith("X-API-Key", next.Secret) == 200 })
	if st := stateWith("X-API-Key", old.Secret); st != 401 {
		t.Errorf("old key after SIGHUP: %d; want 401", st)
	}
	if got := reloads("loaded"); got != loadedBefore+1 {
		t.Errorf("reloads loaded after one SIGHUP: %v; want %v", got, loadedBefore+1)
	}

	// A file that does not parse, with a secret where its digest belongs: refused, not echoed.
	const misplaced = "vg-test-misplaced-8a7b6c5d4e3f20119f8e7d6c5b4a3928"
	testkit.ReplaceFile(t, path, "keys:\n  - name: pasted\n    sha256: "+misplaced+"\n    scopes: [read]\n")
	p.Signal(syscall.SIGHUP)
	testkit.Eventually(t, "the bad file to be refused", func() bool { return reloads("refused") == 1 })
	if st := stateWith("X-API-Key", next.Secret); st != 200 {
		t.Errorf("key loaded before the bad file: %d; want it kept (200)", st)
	}

	out := p.Output()
	for _, secret := range []string{old.Secret, next.Secret, "vg-test-guess-0000", misplaced, apikeys.Digest(old.Secret), apikeys.Digest(next.Secret)} {
		if strings.Contains(out, secret) {
			t.Errorf("the backend wrote a key or its digest to its output")
		}
	}
	if !strings.Contains(out, "api keys reloaded") || !strings.Contains(out, "api keys not reloaded") {
		t.Errorf("no reload or no refused reload in the output:\n%s", out)
	}
}

// Without VG_API_KEYS_FILE the public routes answer without a key, as before, and the backend
// command says so in one line at start.
func TestNoKeysFileNeedsNoKey(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	if st, code, _ := (keyed{method: "GET", uri: "/vouchers/NONE/state"}).send(t, b); st != 200 {
		t.Errorf("state without keys configured: %d %s; want 200", st, code)
	}
	p := backendtest.StartProcess(t, backendtest.Config(t))
	if n := strings.Count(p.Output(), "VG_API_KEYS_FILE is not set"); n != 1 {
		t.Errorf("the backend command warned %d times that no keys are needed; want once:\n%s", n, p.Output())
	}
}
