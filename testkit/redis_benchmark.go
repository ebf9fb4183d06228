package testkit

import (
	"encoding/csv"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// RedisBenchmark runs redis-benchmark against the Redis at addr, clients connections sending
// n requests of cmd (each __rand_int__ a random number below 2,000,000,000), and returns its
// requests per second. It fails t if redis-benchmark fails or met an error reply.
func RedisBenchmark(t testing.TB, addr string, clients, n int, cmd []string) float64 {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n),
		"-r", "2000000000", "--csv"}, cmd...)
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		t.Fatalf("redis-benchmark said %q", out)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil {
		t.Fatalf("redis-benchmark said %q", out)
	}
	if strings.Contains(string(out), "ERR") {
		t.Fatalf("redis-benchmark met errors: %s", out)
	}
	return rps
}
