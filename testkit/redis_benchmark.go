package testkit

import (
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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

// EvalSHA spells a call of script with keys and args as the words of an EVALSHA command, for
// RedisBenchmark or redis-cli: a []byte argument as its bytes, any other (strings, integers) in
// fmt's %v.
func EvalSHA(script *redis.Script, keys []string, args []any) []string {
	cmd := make([]string, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", script.Hash(), strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			cmd = append(cmd, string(v))
		default:
			cmd = append(cmd, fmt.Sprint(v))
		}
	}
	return cmd
}
