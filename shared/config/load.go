// Package config loads a process's settings from VG_* environment variables, optionally
// preceded by a YAML file (VG_CONFIG) that sets the same names. The environment wins.
//
// caarlos0/env reads the variables with defaults in struct tags, as envoyproxy/ratelimit's
// settings do; go.yaml.in/yaml is the maintained YAML parser.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"
	"go.yaml.in/yaml/v3"
)

// FileVar names the variable holding the optional YAML file's path.
const FileVar = "VG_CONFIG"

// Load fills dst (a pointer to a struct with `env` tags) from the YAML file named by VG_CONFIG,
// if any, and then the environment. Errors name the variable to fix and the expected form.
func Load(dst any) error {
	vars := map[string]string{}
	if path := os.Getenv(FileVar); path != "" {
		fromFile, err := readFile(path)
		if err != nil {
			return err
		}
		vars = fromFile
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if err := env.ParseWithOptions(dst, env.Options{Environment: vars}); err != nil {
		return explain(dst, err)
	}
	return nil
}

func readFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: read config file: %w", FileVar, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s=%s: expected a YAML mapping of VG_* names to values: %w", FileVar, path, err)
	}
	vars := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			vars[k] = strings.Join(parts, ",")
		default:
			vars[k] = fmt.Sprint(v)
		}
	}
	return vars, nil
}

// explain rewrites caarlos0/env's errors, which name Go fields, to name the variable.
func explain(dst any, err error) error {
	var all env.AggregateError
	if !errors.As(err, &all) {
		return fmt.Errorf("load config: %w", err)
	}
	msgs := make([]string, 0, len(all.Errors))
	t := reflect.TypeOf(dst).Elem()
	for _, e := range all.Errors {
		var parseErr env.ParseError
		if errors.As(e, &parseErr) {
			if f, ok := t.FieldByName(parseErr.Name); ok {
				msgs = append(msgs, fmt.Sprintf("%s is invalid; expected %s (%v)", f.Tag.Get("env"), describe(f.Type), parseErr.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	return errors.New("config: " + strings.Join(msgs, "; "))
}

func describe(t reflect.Type) string {
	switch {
	case t.String() == "time.Duration":
		return "a duration such as 15m or 500ms"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "a whole number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice:
		return "a comma-separated list"
	}
	return "a " + t.String()
}
