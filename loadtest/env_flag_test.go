package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestSettingsFlagTakesSettingsAndRefusesTheRest(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var env settingsFlag
	fs.Var(&env, "env", "")
	for _, bad := range []string{"VG_EDGE_WARM_CONNS", "PATH=/tmp", "HOME=x", "VG_A B=1", "=1", "GOPATH=/x"} {
		if err := fs.Parse([]string{"-env", bad}); err == nil {
			t.Errorf("-env %q was taken; want it refused", bad)
		}
	}
	ok := []string{"VG_EDGE_WARM_CONNS=384", "GOGC=400", "VG_DB_WARM_CONNS=", "GODEBUG=gctrace=1"}
	var args []string
	for _, s := range ok {
		args = append(args, "-env", s)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	if !slices.Equal(env, ok) {
		t.Fatalf("settings %q, want %q", env, ok)
	}
}
