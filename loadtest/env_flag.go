package main

import (
	"fmt"
	"strings"
)

// settingsFlag collects settings for a process a benchmark starts, VG_NAME=value or one of the
// Go runtime's (GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS), one per use of the flag, so that a
// variant (more warm connections, another pool size, another GC target) is measured with the
// same command as the defaults.
type settingsFlag []string

func (f *settingsFlag) String() string { return strings.Join(*f, " ") }

func (f *settingsFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, "=")
	goRuntime := name == "GOGC" || name == "GOMEMLIMIT" || name == "GODEBUG" || name == "GOMAXPROCS"
	if !ok || !(goRuntime || strings.HasPrefix(name, "VG_")) || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("%q is not a setting; expected VG_NAME=value, or GOGC, GOMEMLIMIT, GODEBUG or GOMAXPROCS=value", v)
	}
	*f = append(*f, v)
	return nil
}
