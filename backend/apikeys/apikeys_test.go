package apikeys_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vouchergate/backend/apikeys"
	"vouchergate/testkit"
)

func entry(name, key, scopes string) string {
	return "  - name: " + name + "\n    sha256: " + apikeys.Digest(key) + "\n    scopes: [" + scopes + "]\n"
}

func TestParse(t *testing.T) {
	good := "keys:\n" + entry("checkout", "k1", "reserve, read") + entry("edge", "k2", "reserve, quota, read, edge")
	tests := []struct {
		name, file, problem string
	}{
		{"two keys", good, ""},
		{"no keys", "keys: []\n", "names no key"},
		{"empty file", "", "names no key"},
		{"comments only", "# keys: none yet\n", "names no key"},
		{"unknown field", "keys:\n  - name: a\n    sha256: " + apikeys.Digest("a") + "\n    scopes: [read]\n    secret: a\n", "field secret not found"},
		{"no name", "keys:\n" + entry("", "k1", "read"), "name is required"},
		{"same name", "keys:\n" + entry("a", "k1", "read") + entry("a", "k2", "read"), "used twice"},
		{"same key", "keys:\n" + entry("a", "k1", "read") + entry("b", "k1", "read"), "listed twice"},
		{"short digest", "keys:\n  - name: a\n    sha256: abcd\n    scopes: [read]\n", "64 hex digits"},
		{"not hex", "keys:\n  - name: a\n    sha256: " + strings.Repeat("z", 64) + "\n    scopes: [read]\n", "64 hex digits"},
		{"unknown scope", "keys:\n" + entry("a", "k1", "admin"), `scope "admin"`},
		{"no scope", "keys:\n" + entry("a", "k1", ""), "scopes is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apikeys.Parse([]byte(tt.file))
			switch {
			case tt.problem == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)):
				t.Fatalf("error %v; want one saying %q", err, tt.problem)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	set, err := apikeys.Parse([]byte("keys:\n" + entry("checkout", "k1", "reserve, read") + entry("edge", "k2", "edge, quota")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		secret string
		name   string
		scopes apikeys.Scope
	}{
		{"k1", "checkout", apikeys.Reserve | apikeys.Read},
		{"k2", "edge", apikeys.Edge | apikeys.Quota},
		{"k3", "", 0},
		{"", "", 0},
		{apikeys.Digest("k1"), "", 0}, // the digest is not the key
	} {
		k, ok := set.Lookup([]byte(tt.secret))
		if ok != (tt.name != "") || k.Name != tt.name || k.Scopes != tt.scopes {
			t.Errorf("Lookup(%q) = %+v, %v; want %s %v", tt.secret, k, ok, tt.name, tt.scopes)
		}
	}
	if got := (apikeys.Reserve | apikeys.Edge).String(); got != "reserve|edge" {
		t.Errorf("String = %q", got)
	}
}

func TestKeyringReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	testkit.ReplaceFile(t, path, "keys:\n"+entry("old", "k-old", "reserve"))
	if _, err := apikeys.Open(filepath.Join(t.TempDir(), "none.yaml"), testkit.QuietLog, nil); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
	k, err := apikeys.Open(path, testkit.QuietLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	has := func(secret string) bool { _, ok := k.Lookup([]byte(secret)); return ok }

	if err := k.Poll(); err != nil || !has("k-old") {
		t.Fatalf("unchanged file: %v, old key %v", err, has("k-old"))
	}
	testkit.ReplaceFile(t, path, "keys:\n"+entry("new", "k-new", "reserve"))
	if err := k.Poll(); err != nil || !has("k-old") {
		t.Fatalf("rotated file, read once: %v; old key %v, want it still in use", err, has("k-old"))
	}
	if err := k.Poll(); err != nil || !has("k-new") || has("k-old") {
		t.Fatalf("rotated file, read the same twice: %v; new key %v, old key %v", err, has("k-new"), has("k-old"))
	}
	testkit.ReplaceFile(t, path, "keys: [oops\n")
	_ = k.Poll()
	if err := k.Poll(); err == nil || !has("k-new") {
		t.Fatalf("bad file: %v; the keys before must stay (new key %v)", err, has("k-new"))
	}
	if err := k.Poll(); err != nil {
		t.Fatalf("the same bad file is reported again: %v", err)
	}
	if err := k.Reload(); err == nil || !has("k-new") {
		t.Fatalf("Reload of the bad file: %v; new key %v", err, has("k-new"))
	}
	os.Remove(path)
	if err := k.Poll(); err == nil || !has("k-new") {
		t.Fatalf("missing file: %v; new key %v", err, has("k-new"))
	}
	testkit.ReplaceFile(t, path, "keys:\n"+entry("third", "k3", "read"))
	if err := k.Reload(); err != nil || !has("k3") || has("k-new") {
		t.Fatalf("Reload: %v; k3 %v, k-new %v", err, has("k3"), has("k-new"))
	}
}

func TestWatchSeesAChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	testkit.ReplaceFile(t, path, "keys:\n"+entry("old", "k-old", "reserve"))
	k, err := apikeys.Open(path, testkit.QuietLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := k.Watch(ctx, 10*time.Millisecond)
	testkit.ReplaceFile(t, path, "keys:\n"+entry("new", "k-new", "reserve"))
	testkit.Eventually(t, "the watched file's new key", func() bool { _, ok := k.Lookup([]byte("k-new")); return ok })
	cancel()
	<-done
}

// BenchmarkLookup is the key check's own cost: hash a 48-byte key, look its digest up among
// 16 keys, compare.
func BenchmarkLookup(b *testing.B) {
	var file strings.Builder
	file.WriteString("keys:\n")
	for i := range 16 {
		file.WriteString(entry("k"+strings.Repeat("x", i), "vg-bench-key-"+strings.Repeat("k", 35)+string(rune('a'+i)), "reserve"))
	}
	set, err := apikeys.Parse([]byte(file.String()))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, secret string }{
		{"known", "vg-bench-key-" + strings.Repeat("k", 35) + "c"},
		{"unknown", "vg-bench-key-" + strings.Repeat("k", 35) + "!"},
	} {
		secret := []byte(c.secret)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_, ok := set.Lookup(secret)
				if ok != (c.name == "known") {
					b.Fatal(ok)
				}
			}
		})
	}
}
