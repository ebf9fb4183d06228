package app_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// A Redis outage under load fails every flash reservation alike and answers every quota deduct
// of a business line set to whenUnavailable OPEN degraded: the backend command (with
// VG_LOG_FORMAT=json) writes a bounded number of lines for it, "request failed" and the
// degraded answer's warning each at most once a second for its kind with how many it left out
// (dropped=), and every line is JSON, go-redis' own reports included. The degrade backoff is 1ms,
// so that nearly every deduct tries Redis and meets the outage itself, as a hung Redis would
// make every deduct of its backoff's first milliseconds do.
func TestARedisOutageUnderLoadWritesFewLinesAllJSON(t *testing.T) {
	srv := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = srv.URL()
	p := backendtest.StartProcess(t, cfg, "VG_LOG_FORMAT=json", "VG_QUOTA_DEGRADE_BACKOFF=1ms")
	b := p.Client()
	b.CreateVoucher(t, backendtest.Voucher{Code: "OUTAGE", Discount: 5, TotalLimit: 100000, FlashSale: true})
	if st, body := b.Reserve(t, "OUTAGE", "c-first", "o-first", 100); st != 201 {
		t.Fatalf("a reservation before the outage: %d %s", st, body)
	}
	for _, admin := range []struct{ path, body string }{
		{"/admin/quota-rules", `{"bizId":1,"identityType":"USER","dimension":"*","limit":1000000,"window":{"type":"DAY","timezone":"UTC"}}`},
		{"/admin/quota-settings", `{"bizId":1,"whenUnavailable":"OPEN"}`},
	} {
		if st, body := b.Do(t, "POST", admin.path, admin.body); st/100 != 2 {
			t.Fatalf("POST %s: %d %s", admin.path, st, body)
		}
	}
	deduct := func(key string) int {
		st, _ := b.Do(t, "POST", "/quotas/deduct", `{"bizId":1,"idemKey":"`+key+`","items":[{"identityType":"USER","identity":"`+key+`","dimensions":["ITEM:1"]}]}`)
		return st
	}
	if st := deduct("before"); st != 200 {
		t.Fatalf("a deduct before the outage: %d", st)
	}
	logStart := len(p.Output())

	srv.Stop()
	const waves, perWave, workers = 3, 700, 32
	statuses, deducts := map[int]int{}, map[int]int{}
	var mu sync.Mutex
	start := time.Now()
	for w := range waves {
		if w > 0 {
			time.Sleep(1100 * time.Millisecond) // the next wave in another second: its first line counts the last's
		}
		var wg sync.WaitGroup
		orders := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range orders {
					st, _ := b.Reserve(t, "OUTAGE", fmt.Sprintf("c-%d-%d", w, i), fmt.Sprintf("o-%d-%d", w, i), 100)
					degraded := deduct(fmt.Sprintf("d-%d-%d", w, i))
					mu.Lock()
					statuses[st]++
					deducts[degraded]++
					mu.Unlock()
				}
			}()
		}
		for i := range perWave {
			orders <- i
		}
		close(orders)
		wg.Wait()
	}
	elapsed := time.Since(start)
	const n = waves * perWave
	if statuses[503] != n {
		t.Fatalf("%d reservations with Redis stopped: %v; want all 503", n, statuses)
	}
	if deducts[200] != n {
		t.Fatalf("%d deducts of an OPEN business line with Redis stopped: %v; want all 200 (degraded)", n, deducts)
	}

	logged := strings.TrimSpace(p.Output()[logStart:])
	records := testkit.JSONLog(t, logged)
	failed, dropped := 0, 0
	degradedLines, degradedDropped := 0, 0
	for _, rec := range records {
		switch {
		case rec.Msg == "request failed":
			failed++
			dropped += rec.Dropped
		case strings.HasPrefix(rec.Msg, "quota: Redis unreachable; the business line degrades OPEN"):
			degradedLines++
			degradedDropped += rec.Dropped
		}
	}
	lines := strings.Split(logged, "\n")
	// one kind of failure, and a few kinds of go-redis report, each once a second at most
	seconds := int(elapsed/time.Second) + 1
	if most := 8 * seconds; len(lines) > most || len(lines) > n/20 {
		t.Errorf("%d requests failed in %v and the backend wrote %d lines; want at most %d:\n%s",
			n, elapsed.Round(time.Millisecond), len(lines), min(most, n/20), testkit.Tail(logged, 4<<10))
	}
	if failed < 2 || dropped < 1 || failed+dropped > n {
		t.Errorf("%d \"request failed\" lines counting %d left out; want at least 2, the later ones counting those left out, %d in all at most:\n%s",
			failed, dropped, n, testkit.Tail(logged, 4<<10))
	}
	if degradedLines < 2 || degradedLines > seconds+1 || degradedDropped < 1 || degradedLines+degradedDropped > n {
		t.Errorf("%d degraded-answer lines counting %d left out in %v; want at least 2 and at most one a second, the later ones counting those left out, %d in all at most:\n%s",
			degradedLines, degradedDropped, elapsed.Round(time.Millisecond), n, testkit.Tail(logged, 4<<10))
	}
}
