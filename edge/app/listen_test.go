package app_test

import (
	"net"
	"strings"
	"testing"
)

// An edge whose address another process holds stops with exit status 1, naming the address's
// variable, and never says it is listening.
func TestEdgeOnATakenPortSaysSoAndNotListening(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	status, out := runEdgeUntilExit(t, "VG_EDGE_ADDR="+taken.Addr().String())
	if status != 1 || !strings.Contains(out, "VG_EDGE_ADDR="+taken.Addr().String()) || !strings.Contains(out, "address already in use") {
		t.Errorf("edge on a taken port: exit %d, output:\n%s\nwant exit 1 naming VG_EDGE_ADDR and the address in use", status, out)
	}
	if strings.Contains(out, "edge listening") {
		t.Errorf("the edge said it was listening on a port it could not take:\n%s", out)
	}
}
