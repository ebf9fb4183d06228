package faulttest

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"vouchergate/backend/backendtest"
)

func TestMain(m *testing.M) {
	// Fault tests dial dead servers on purpose; go-redis would log every refused dial.
	redis.SetLogger(quietRedis{})
	code := m.Run()
	backendtest.RemoveBinary()
	os.Exit(code)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
