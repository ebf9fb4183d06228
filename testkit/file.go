package testkit

import (
	"os"
	"testing"
)

// ReplaceFile replaces the file at path with content by a rename, as an operator's tool would,
// so that a process polling the file never reads half of it.
func ReplaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
