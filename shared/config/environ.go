package config

import (
	"os"
	"strings"
)

// EnvironWithoutVG is this process's environment without its VG_ settings: what a command a
// test or the load tool starts inherits, before the settings it is given.
func EnvironWithoutVG() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VG_") {
			env = append(env, kv)
		}
	}
	return env
}
