package config

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The README's configuration table names every variable each process reads, the processes
// that read it and its default, as the code has them; and nothing else.
func TestTheREADMEConfigurationTableIsTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(VG_[A-Z0-9_]+)` \\| ([a-z, ]+) \\| ([^|]+) \\|")
	documented := map[string][2]string{} // variable → readers, default
	for _, line := range strings.Split(string(raw), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			documented[m[1]] = [2]string{m[2], strings.Trim(strings.TrimSpace(m[3]), "`")}
		}
	}

	type read struct {
		readers []string
		def     string
	}
	code := map[string]*read{}
	for _, p := range []struct {
		name     string
		settings any
	}{{"backend", Backend{}}, {"edge", Edge{}}} {
		for name, def := range envDefaults(reflect.TypeOf(p.settings)) {
			if code[name] == nil {
				code[name] = &read{def: def}
			}
			code[name].readers = append(code[name].readers, p.name)
		}
	}
	for name, r := range code {
		d, ok := documented[name]
		if !ok {
			t.Errorf("README's configuration table does not name %s", name)
			continue
		}
		sort.Strings(r.readers)
		want := r.def
		if want == "" {
			want = "(none)"
		}
		if got := strings.Join(r.readers, ", "); d[0] != got {
			t.Errorf("README says %s is read by %q; the code: %q", name, d[0], got)
		}
		if d[1] != want {
			t.Errorf("README says %s defaults to %q; the code: %q", name, d[1], want)
		}
	}
	for name := range documented {
		if code[name] == nil {
			t.Errorf("README's configuration table names %s, which no process reads", name)
		}
	}
}

// envDefaults returns each variable a settings struct reads with its default, its embedded
// structs' included.
func envDefaults(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name := f.Tag.Get("env"); name != "" {
			out[name] = f.Tag.Get("envDefault")
		} else if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for name, def := range envDefaults(f.Type) {
				out[name] = def
			}
		}
	}
	return out
}
