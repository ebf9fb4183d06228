// Package apikeys holds the backend's service API keys: which calling application a key names
// and which scopes it may use. Keys are read from a YAML file (VG_API_KEYS_FILE) that stores
// only each key's SHA-256 digest, and are replaced whole when the file changes, so keys rotate
// without a restart (keyring.go).
package apikeys

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Scope is a set of things a key may do, one bit each.
type Scope uint8

// The scopes. A route names the scopes that let a key call it; any one of them is enough.
const (
	Reserve Scope = 1 << iota // reserve, confirm and release a voucher's use
	Quota                     // deduct, roll back and read purchase quotas
	Read                      // read a voucher's sold-out state and quota usage
	Edge                      // send X-VG-Subject, the end user the edge verified
)

var scopeNames = []struct {
	scope Scope
	name  string
}{{Reserve, "reserve"}, {Quota, "quota"}, {Read, "read"}, {Edge, "edge"}}

// String names the scopes of s, joined with '|'.
func (s Scope) String() string {
	var names []string
	for _, n := range scopeNames {
		if s&n.scope != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, "|")
}

func parseScope(name string) (Scope, bool) {
	for _, n := range scopeNames {
		if n.name == name {
			return n.scope, true
		}
	}
	return 0, false
}

// Key is a calling application, named by the operator, with what it may do.
type Key struct {
	Name   string
	Scopes Scope
}

// Set is the keys of one keys file, by the SHA-256 digest of their secret. It is not changed
// once parsed, so readers share it without locks.
type Set struct {
	byDigest map[[sha256.Size]byte]entry
	names    []string // in the file's order, for the log
}

type entry struct {
	Key
	digest [sha256.Size]byte
}

// Len is how many keys s holds.
func (s *Set) Len() int { return len(s.byDigest) }

// Names lists the keys' names in the file's order (never their digests).
func (s *Set) Names() []string { return s.names }

// Lookup returns the key whose secret is secret.
//
// The secret is hashed first and only its digest is looked up and compared. A map lookup and a
// byte comparison may take longer the more of the digest matches a stored one, but the caller
// computes that digest himself: learning stored digests byte by byte would leave him a SHA-256
// preimage of a long random secret to find, which is out of reach. The hash is what makes the
// check safe against timing; the constant-time compare after the map hit keeps the decision
// from resting on the map's own equality alone, for a few nanoseconds.
func (s *Set) Lookup(secret []byte) (Key, bool) {
	d := sha256.Sum256(secret)
	e, ok := s.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return Key{}, false
	}
	return e.Key, true
}

// file is the keys file's form. A key is stored as its SHA-256, not bcrypt or argon2: slow
// hashes protect short, guessable passwords at tens of milliseconds a check, which every request
// would pay; a key is a long random secret (32 bytes or more) that no speed of hashing makes
// guessable, so a fast digest is as safe and costs a microsecond.
//
//	keys:
//	  - name: checkout
//	    sha256: 3b1f…   # printf %s "$KEY" | sha256sum
//	    scopes: [reserve, read]
type file struct {
	Keys []struct {
		Name   string   `yaml:"name"`
		SHA256 string   `yaml:"sha256"`
		Scopes []string `yaml:"scopes"`
	} `yaml:"keys"`
}

// ErrNoKeys is a keys file that names no key: every call would be refused. To need no key,
// unset VG_API_KEYS_FILE instead.
var ErrNoKeys = errors.New("the file names no key; to turn keys off unset VG_API_KEYS_FILE")

// Parse reads a keys file. Its errors name the entry to fix and the form expected; they never
// quote a digest.
func Parse(raw []byte) (*Set, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); errors.Is(err, io.EOF) {
		return nil, ErrNoKeys // an empty file, or comments only
	} else if err != nil {
		return nil, fmt.Errorf("expected keys: [{name, sha256, scopes: [reserve|quota|read|edge, …]}, …]: %w", err)
	}
	if len(f.Keys) == 0 {
		return nil, ErrNoKeys
	}
	s := &Set{byDigest: make(map[[sha256.Size]byte]entry, len(f.Keys))}
	names := map[string]bool{}
	for i, e := range f.Keys {
		where := fmt.Sprintf("keys[%d]", i)
		if e.Name == "" {
			return nil, fmt.Errorf("%s: name is required; it names the caller in logs and errors", where)
		}
		where += " (" + e.Name + ")"
		if names[e.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		names[e.Name] = true
		var d [sha256.Size]byte
		// the length first: hex.Decode writes past d for a longer string
		if len(e.SHA256) != hex.EncodedLen(sha256.Size) {
			return nil, fmt.Errorf(`%s: sha256 must be 64 hex digits, the key's SHA-256 (printf %%s "$KEY" | sha256sum)`, where)
		}
		if _, err := hex.Decode(d[:], []byte(e.SHA256)); err != nil {
			return nil, fmt.Errorf(`%s: sha256 must be 64 hex digits, the key's SHA-256 (printf %%s "$KEY" | sha256sum)`, where)
		}
		if _, dup := s.byDigest[d]; dup {
			return nil, fmt.Errorf("%s: the same key is listed twice", where)
		}
		k := Key{Name: e.Name}
		for _, name := range e.Scopes {
			sc, ok := parseScope(name)
			if !ok {
				return nil, fmt.Errorf("%s: scope %q is not one of reserve, quota, read, edge", where, name)
			}
			k.Scopes |= sc
		}
		if k.Scopes == 0 {
			return nil, fmt.Errorf("%s: scopes is required: one or more of reserve, quota, read, edge", where)
		}
		s.byDigest[d] = entry{Key: k, digest: d}
		s.names = append(s.names, e.Name)
	}
	return s, nil
}

// Digest returns the hex SHA-256 of a key, as the keys file stores it.
func Digest(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}
