package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Every example in configs/ loads as its process reads it and passes Check; it sets only
// variables that process reads (a misspelt key would be ignored silently), names every one
// of them (set, or in a comment), and sets each to its default, as the files say they do.
func TestEveryExampleConfigLoadsAndPassesCheck(t *testing.T) {
	loaders := map[string]struct {
		settings any // a pointer to the settings struct
		load     func() (any, error)
	}{
		"backend.yaml": {&Backend{}, func() (any, error) { return LoadBackend() }},
		"edge.yaml":    {&Edge{}, func() (any, error) { return LoadEdge() }},
	}
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs/*.yaml found (%v)", err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			l, ok := loaders[name]
			if !ok {
				t.Fatalf("configs/%s: no process reads it; add it to this test", name)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var set map[string]any
			if err := yaml.Unmarshal(raw, &set); err != nil {
				t.Fatal(err)
			}
			vars := envNames(reflect.TypeOf(l.settings).Elem())
			for k := range set {
				if !vars[k] {
					t.Errorf("configs/%s sets %s, which its process does not read", name, k)
				}
			}
			for v := range vars {
				if !strings.Contains(string(raw), v+":") {
					t.Errorf("configs/%s does not name %s", name, v)
				}
			}

			cleanEnv(t)
			defaults, err := l.load()
			if err != nil {
				t.Fatalf("defaults: %v", err)
			}
			t.Setenv(FileVar, path)
			fromFile, err := l.load()
			if err != nil {
				t.Fatalf("configs/%s: %v", name, err)
			}
			if !reflect.DeepEqual(fromFile, defaults) {
				t.Errorf("configs/%s reads as\n%+v\nthe defaults are\n%+v", name, fromFile, defaults)
			}
		})
	}
}

// envNames returns the variables a settings struct reads, its embedded structs' included.
func envNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for name := range envDefaults(t) {
		names[name] = true
	}
	return names
}
