package apikeys_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"vouchergate/backend/apikeys"
	"vouchergate/testkit"
)

// keyring opens a keyring on a keys file holding the key "k-old", with its metrics in a
// registry of its own, and returns it with its path and a reader of its metrics.
func keyring(t *testing.T) (*apikeys.Keyring, string, func(name, result string) float64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	testkit.ReplaceFile(t, path, "keys:\n"+entry("old", "k-old", "reserve"))
	reg := prometheus.NewRegistry()
	k, err := apikeys.Open(path, testkit.QuietLog, reg)
	if err != nil {
		t.Fatal(err)
	}
	metric := func(name, result string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) == 0 && result == "" {
					return m.GetGauge().GetValue()
				}
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" && l.GetValue() == result {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	return k, path, metric
}

func has(k *apikeys.Keyring, secret string) bool { _, ok := k.Lookup([]byte(secret)); return ok }

// writeInPlace writes content over the file at path, as an editor or `>` does: a reader may
// see it half written.
func writeInPlace(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A file written in two chunks, the first of which parses on its own, is not taken half done:
// a poll that reads the first chunk waits for the next to read the same, and by then the file
// is whole. Taking the first chunk would have dropped the key only the second holds.
func TestKeyringDoesNotTakeAHalfWrittenFile(t *testing.T) {
	k, path, metric := keyring(t)
	first := "keys:\n" + entry("new", "k-new", "reserve")
	writeInPlace(t, path, first)
	if err := k.Poll(); err != nil || !has(k, "k-old") || has(k, "k-new") {
		t.Fatalf("first chunk read once: %v; old key %v, new key %v; want the keys before, untouched", err, has(k, "k-old"), has(k, "k-new"))
	}
	writeInPlace(t, path, first+entry("old", "k-old", "reserve"))
	if err := k.Poll(); err != nil || !has(k, "k-old") || has(k, "k-new") {
		t.Fatalf("whole file read once: %v; old key %v, new key %v", err, has(k, "k-old"), has(k, "k-new"))
	}
	if err := k.Poll(); err != nil || !has(k, "k-old") || !has(k, "k-new") {
		t.Fatalf("whole file read twice: %v; old key %v, new key %v; want both", err, has(k, "k-old"), has(k, "k-new"))
	}
	if got := metric("vouchergate_api_key_reloads_total", "loaded"); got != 1 {
		t.Errorf("reloads loaded: %v; want 1 (the whole file only)", got)
	}
}

// An emptied file, or one listing no key, keeps the keys before: counted as empty once, and
// the stale gauge says so until a good file is loaded.
func TestKeyringKeepsItsKeysWhenTheFileIsEmptied(t *testing.T) {
	for _, content := range []string{"", "keys: []\n", "# rotated\n"} {
		t.Run(fmt.Sprintf("%q", content), func(t *testing.T) {
			k, path, metric := keyring(t)
			writeInPlace(t, path, content)
			for range 3 {
				_ = k.Poll()
			}
			if !has(k, "k-old") {
				t.Fatal("the emptied file dropped the keys before")
			}
			if got := metric("vouchergate_api_key_reloads_total", "empty"); got != 1 {
				t.Errorf("reloads empty: %v; want 1", got)
			}
			if !k.Stale() || metric("vouchergate_api_keys_stale", "") != 1 {
				t.Errorf("stale %v, gauge %v; want 1 while the file names no key", k.Stale(), metric("vouchergate_api_keys_stale", ""))
			}
			testkit.ReplaceFile(t, path, "keys:\n"+entry("new", "k-new", "read"))
			_ = k.Poll()
			if err := k.Poll(); err != nil || !has(k, "k-new") || has(k, "k-old") || k.Stale() {
				t.Errorf("a good file after the empty one: %v; new %v, old %v, stale %v", err, has(k, "k-new"), has(k, "k-old"), k.Stale())
			}
		})
	}
}

// A deleted file keeps the keys before, counted as missing once however often it is polled;
// the same file put back clears the stale gauge, and a new one replaced by rename is loaded.
func TestKeyringKeepsItsKeysWhenTheFileIsDeleted(t *testing.T) {
	k, path, metric := keyring(t)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := k.Poll(); err == nil {
		t.Error("Poll of a deleted file: no error")
	}
	for range 3 {
		_ = k.Poll()
	}
	if !has(k, "k-old") || !k.Stale() {
		t.Fatalf("deleted file: old key %v, stale %v; want the keys kept, stale", has(k, "k-old"), k.Stale())
	}
	if got := metric("vouchergate_api_key_reloads_total", "missing"); got != 1 {
		t.Errorf("reloads missing: %v; want 1", got)
	}
	if err := k.Reload(); err == nil || !has(k, "k-old") {
		t.Errorf("Reload (SIGHUP) of a deleted file: %v; old key %v", err, has(k, "k-old"))
	}

	testkit.ReplaceFile(t, path, string(original))
	if err := k.Poll(); err != nil || k.Stale() || !has(k, "k-old") {
		t.Errorf("the same file back: %v; stale %v; want the gauge cleared at once", err, k.Stale())
	}

	testkit.ReplaceFile(t, path, "keys:\n"+entry("renamed", "k-renamed", "read"))
	_ = k.Poll()
	if err := k.Poll(); err != nil || !has(k, "k-renamed") || has(k, "k-old") {
		t.Errorf("a file replaced by rename: %v; new key %v, old key %v", err, has(k, "k-renamed"), has(k, "k-old"))
	}
}

// Reload (SIGHUP) reads the file twice, ReloadSettle apart: a file being written all along is
// not loaded, and not flagged stale either; once it stops changing, Reload takes it.
func TestKeyringReloadWaitsForAFileThatStopsChanging(t *testing.T) {
	k, path, metric := keyring(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			writeInPlace(t, path, "keys:\n"+entry(fmt.Sprintf("writing-%d", i), fmt.Sprintf("k-%d", i), "read"))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	err := k.Reload()
	close(stop)
	wg.Wait()
	if err == nil || !has(k, "k-old") || k.Stale() || metric("vouchergate_api_key_reloads_total", "changing") != 1 {
		t.Fatalf("Reload of a file being written: %v; old key %v, stale %v, changing %v; want it refused, not stale",
			err, has(k, "k-old"), k.Stale(), metric("vouchergate_api_key_reloads_total", "changing"))
	}
	testkit.ReplaceFile(t, path, "keys:\n"+entry("new", "k-new", "read"))
	if err := k.Reload(); err != nil || !has(k, "k-new") {
		t.Fatalf("Reload of a settled file: %v; new key %v", err, has(k, "k-new"))
	}
}
