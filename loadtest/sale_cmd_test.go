package main

import (
	"context"
	"net"
	"testing"
)

// TestSaleExitsTwoWhenItCannotRun: bad flags, or a target nobody answers on.
func TestSaleExitsTwoWhenItCannotRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for name, args := range map[string][]string{
		"unknown flag":   {"-no-such-flag"},
		"no code":        {"-target", closed},
		"bad share":      {"-code", "X", "-retry-share", "2"},
		"stray argument": {"-code", "X", "extra"},
		"unreachable":    {"-code", "X", "-target", closed, "-token", "t", "-requests", "1"},
	} {
		if got := runSale(context.Background(), args); got != exitUsage {
			t.Errorf("%s: exit %d, want %d", name, got, exitUsage)
		}
	}
}
