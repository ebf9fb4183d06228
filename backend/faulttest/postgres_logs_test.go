package faulttest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// PostgreSQL dies under a flash sale's load, twice. Every winner the gate admits meanwhile
// fails its write: it gives its use back, or leaves it held when the write's outcome is
// unknown, and each would write a line of its own. The backend writes each kind of line at
// most once a second, the next one counting those it left out (dropped=), and every line is
// JSON.
//
// Once its copy of the voucher is more than a second old the backend cannot read it again, so
// requests stop reaching the gate: each burst comes right after a read of the voucher.
func TestAPostgresOutageUnderLoadWritesFewLinesAllJSON(t *testing.T) {
	pg := testkit.StartPostgres(t)
	cfg := backendtest.Config(t)
	cfg.DatabaseURL = testkit.Database(t, pg.URL())
	p := backendtest.StartProcess(t, cfg, "VG_LOG_FORMAT=json")
	b := p.Client()
	const code = "PG-OUTAGE"
	b.CreateVoucher(t, backendtest.Voucher{Code: code, Discount: 5, TotalLimit: 100000, FlashSale: true})
	if st, body := b.Reserve(t, code, "c-first", "o-first", 100); st != 201 {
		t.Fatalf("a reservation before the outage: %d %s", st, body)
	}
	logStart := len(p.Output())

	const outages, perOutage, workers = 2, 3000, 32
	statuses := map[int]int{}
	var mu sync.Mutex
	var elapsed time.Duration
	for o := range outages {
		if o > 0 {
			pg.Start()
		}
		time.Sleep(1100 * time.Millisecond) // the backend's copy of the voucher is old now
		deadline := time.Now().Add(10 * time.Second)
		for st, body := b.Reserve(t, code, fmt.Sprintf("c-fresh-%d", o), fmt.Sprintf("o-fresh-%d", o), 100); st != 201; {
			if time.Now().After(deadline) {
				t.Fatalf("a reservation that reads the voucher again: %d %s", st, body)
			}
			time.Sleep(50 * time.Millisecond)
			st, body = b.Reserve(t, code, fmt.Sprintf("c-fresh-%d", o), fmt.Sprintf("o-fresh-%d", o), 100)
		}

		start := time.Now()
		pg.Kill()
		var wg sync.WaitGroup
		orders := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range orders {
					st, _ := b.Reserve(t, code, fmt.Sprintf("c-%d-%d", o, i), fmt.Sprintf("o-%d-%d", o, i), 100)
					mu.Lock()
					statuses[st]++
					mu.Unlock()
				}
			}()
		}
		for i := range perOutage {
			orders <- i
		}
		close(orders)
		wg.Wait()
		elapsed += time.Since(start)
	}
	const n = outages * perOutage
	if statuses[503] != n {
		t.Errorf("%d reservations with PostgreSQL down: %v; want all 503", n, statuses)
	}

	metrics := testkit.ScrapeMetrics(t, p.OpsURL()+"/metrics")
	givenBack := int(metrics.Count(t, "vouchergate_compensations_total", "result", "released"))
	const given, unknown = "use given back in redis after its write failed", "reservation write outcome unknown; use left held in redis for the reconciler"
	logged := p.Output()[logStart:]
	records := testkit.JSONLog(t, logged)
	perKind, dropped := map[string]int{}, map[string]int{}
	for _, rec := range records {
		perKind[rec.Msg]++
		dropped[rec.Msg] += rec.Dropped
	}
	t.Logf("%d reservations in %v of outage: %d uses given back; %d lines: %v, dropped %v",
		n, elapsed.Round(time.Millisecond), givenBack, len(records), perKind, dropped)

	// The burst must have met the writer: winners whose write failed, many to a second.
	if givenBack+dropped[unknown]+perKind[unknown] < 100 {
		t.Fatalf("%d uses given back and %d unknown outcomes: the burst met too few writes to tell", givenBack, dropped[unknown]+perKind[unknown])
	}
	seconds := int(elapsed/time.Second) + outages
	for _, kind := range []string{given, unknown} {
		if perKind[kind] > seconds {
			t.Errorf("%d lines %q in %v of outage; want at most one a second", perKind[kind], kind, elapsed.Round(time.Millisecond))
		}
	}
	// the second outage's first line counts what the first one left out
	if perKind[given] < 2 || dropped[given] < 1 || perKind[given]+dropped[given] > givenBack {
		t.Errorf("%d lines %q counting %d left out, for %d uses given back; want the later ones counting those left out, no more than were given back",
			perKind[given], given, dropped[given], givenBack)
	}
	// a few kinds of failure, each once a second at most
	if most := 8 * seconds; len(records) > most || len(records) > n/20 {
		t.Errorf("%d reservations failed in %v and the backend wrote %d lines; want at most %d:\n%s",
			n, elapsed.Round(time.Millisecond), len(records), min(most, n/20), testkit.Tail(logged, 4<<10))
	}
}
