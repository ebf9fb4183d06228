package apikeys_test

import (
	"encoding/hex"
	"testing"

	"go.yaml.in/yaml/v3"

	"vouchergate/backend/apikeys"
)

// FuzzParse holds Parse to a plain YAML reading of the same file: what it accepts has as many
// keys as the file has entries, each with a distinct name, a 32-byte hex digest and known
// scopes; and it never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte("keys:\n" + entry("checkout", "k1", "reserve, read") + entry("edge", "k2", "edge")))
	f.Add([]byte("keys: []\n"))
	f.Add([]byte("keys:\n  - {name: a, sha256: " + apikeys.Digest("a") + ", scopes: [quota]}\n"))
	f.Add([]byte("keys: [{name: broken\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		set, err := apikeys.Parse(raw)
		if err != nil {
			return
		}
		var plain struct {
			Keys []struct {
				Name   string   `yaml:"name"`
				SHA256 string   `yaml:"sha256"`
				Scopes []string `yaml:"scopes"`
			} `yaml:"keys"`
		}
		if err := yaml.Unmarshal(raw, &plain); err != nil {
			t.Fatalf("Parse accepted what yaml refuses: %v", err)
		}
		if set.Len() != len(plain.Keys) || len(set.Names()) != len(plain.Keys) {
			t.Fatalf("Parse kept %d keys (%d names) of %d entries", set.Len(), len(set.Names()), len(plain.Keys))
		}
		names := map[string]bool{}
		for _, k := range plain.Keys {
			if k.Name == "" || names[k.Name] {
				t.Fatalf("Parse accepted an empty or repeated name %q", k.Name)
			}
			names[k.Name] = true
			if d, err := hex.DecodeString(k.SHA256); err != nil || len(d) != 32 {
				t.Fatalf("Parse accepted digest %q", k.SHA256)
			}
			if len(k.Scopes) == 0 {
				t.Fatalf("Parse accepted %s without scopes", k.Name)
			}
			for _, s := range k.Scopes {
				if s != "reserve" && s != "quota" && s != "read" && s != "edge" {
					t.Fatalf("Parse accepted scope %q", s)
				}
			}
		}
	})
}
