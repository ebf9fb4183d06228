package backendtest

import (
	"os"
	"strings"
	"testing"

	"vouchergate/backend/apikeys"
)

// APIKey is a service API key of a test backend's keys file (VG_API_KEYS_FILE).
type APIKey struct {
	Name, Secret string
	Scopes       []string // reserve, quota, read, edge
}

// WriteKeys writes a keys file holding keys at path, replacing the file by a rename as an
// operator's tool would, so a backend polling it never reads half a file.
func WriteKeys(t testing.TB, path string, keys ...APIKey) {
	t.Helper()
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, k := range keys {
		b.WriteString("  - name: " + k.Name + "\n    sha256: " + apikeys.Digest(k.Secret) +
			"\n    scopes: [" + strings.Join(k.Scopes, ", ") + "]\n")
	}
	WriteFile(t, path, b.String())
}

// WriteFile replaces the file at path with content by a rename.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
