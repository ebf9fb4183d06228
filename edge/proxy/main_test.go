package proxy

import (
	"os"
	"testing"

	"vouchergate/testkit"
)

// TestMain serves the stand-in checkout API when the test binary is started as one
// (testkit.StartCheckoutStandIn), and runs the tests otherwise.
func TestMain(m *testing.M) {
	testkit.RunCheckoutStandInIfAsked()
	os.Exit(m.Run())
}
