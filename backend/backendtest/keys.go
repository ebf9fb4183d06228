package backendtest

import (
	"strings"
	"testing"

	"vouchergate/backend/apikeys"
	"vouchergate/testkit"
)

// APIKey is a service API key of a test backend's keys file (VG_API_KEYS_FILE).
type APIKey struct {
	Name, Secret string
	Scopes       []string // reserve, quota, read, edge
}

// WriteKeys writes a keys file holding keys at path (testkit.ReplaceFile).
func WriteKeys(t testing.TB, path string, keys ...APIKey) {
	t.Helper()
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, k := range keys {
		b.WriteString("  - name: " + k.Name + "\n    sha256: " + apikeys.Digest(k.Secret) +
			"\n    scopes: [" + strings.Join(k.Scopes, ", ") + "]\n")
	}
	testkit.ReplaceFile(t, path, b.String())
}
