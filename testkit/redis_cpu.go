package testkit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCPU returns the CPU time the Redis server behind c has used so far (INFO cpu, user and
// system), for a benchmark to report what a call costs Redis itself.
func RedisCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("read redis INFO cpu: %w", err)
	}
	var seconds float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("read redis INFO cpu: %s: %w", k, err)
			}
			seconds += f
		}
	}
	return time.Duration(seconds * float64(time.Second)), nil
}
