package flashbench

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestBenchmarksAgainstARealBackend runs one short round of each benchmark against a backend
// built from this tree, on the shared servers, and checks what they report and that they
// leave nothing behind.
func TestBenchmarksAgainstARealBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the backend")
	}
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Skip("pgbench is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := StartBackend(ctx, DefaultServers, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s1, err := StartSolution1(ctx, DefaultServers, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()

	short := Loop{Rounds: 1, Duration: time.Second, Warmup: 100 * time.Millisecond, Conns: 4}
	aw, err := RunAllWin(ctx, b, s1, AllWinSettings{Loop: short, PgClients: 4, PgThreads: 1})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.LogTail(2000))
	}
	if aw.BackendRPS() <= 0 || aw.PgbenchTPS() <= 0 || aw.Solution1[0].P99 < aw.Solution1[0].P50 || aw.Solution1[0].P50 <= 0 {
		t.Fatalf("all-win report %+v", aw)
	}
	var out bytes.Buffer
	aw.Print(&out)
	if aw.CPUPerWin() <= 0 {
		t.Fatalf("CPU per win %v: the backend, PostgreSQL and Redis were not measured", aw.CPUPerWin())
	}
	if !strings.Contains(out.String(), "ratio backend/pgbench") || !strings.Contains(out.String(), "CPU per win, backend + postgres + redis") {
		t.Fatalf("all-win report printed:\n%s", out.String())
	}

	rf, err := RunRefusals(ctx, b, RefusalSettings{Loop: short})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.LogTail(2000))
	}
	if len(rf.Refused) != 1 || rf.Refused[0].Statuses[409] == 0 || len(rf.Won) != 1 || rf.Won[0].Statuses[201] == 0 || rf.UsedSoldOut != 1 {
		t.Fatalf("refusals report %+v", rf)
	}
	out.Reset()
	rf.Print(&out)
	if !strings.Contains(out.String(), "a refusal costs") {
		t.Fatalf("refusals report printed:\n%s", out.String())
	}

	sr, err := RunSales(ctx, b, SaleSettings{Rounds: 1, Uses: 100, Conns: 20, Tail: 100 * time.Millisecond, Limit: 20 * time.Second, Baseline: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.LogTail(2000))
	}
	for _, r := range append(sr.Flash, sr.Normal...) {
		if f := r.Faults(100); len(f) > 0 || r.Result.SoldOut <= 0 {
			t.Errorf("sale of %s: %v, sold out at %v", r.Code, f, r.Result.SoldOut)
		}
	}
	out.Reset()
	sr.Print(&out)
	if !strings.Contains(out.String(), "verdict (flash): 1 of 1 rounds clean") {
		t.Fatalf("sale report printed:\n%s", out.String())
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := countKeys(ctx, b); err != nil || n != 0 {
		t.Fatalf("%d keys left under the backend's prefix (%v)", n, err)
	}
}

func countKeys(ctx context.Context, b *Backend) (int, error) {
	opts, err := redis.ParseURL(DefaultServers.RedisURL)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, b.redisPfx+"*").Result()
	return len(keys), err
}
