package app_test

import (
	"os"
	"testing"

	"vouchergate/backend/backendtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	backendtest.RemoveBinary() // built by the tests that run the backend as a process
	os.Exit(code)
}
