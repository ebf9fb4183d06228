package api_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"vouchergate/backend/backendtest"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

func exec(t *testing.T, b *backendtest.Backend, sql string, args ...any) {
	t.Helper()
	if _, err := b.App.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// readRedis reads a loaded flash voucher's gate.
func readRedis(t *testing.T, b *backendtest.Backend, code string) backendtest.Gate {
	t.Helper()
	g := backendtest.ReadGate(t, b.App.Redis, b.Config.RedisPrefix, code)
	if !g.Loaded {
		t.Fatalf("%s is not loaded in redis", code)
	}
	return g
}

func sameRedis(t *testing.T, before, after backendtest.Gate) {
	t.Helper()
	if before.Remaining != after.Remaining || len(before.Orders) != len(after.Orders) || len(before.Users) != len(after.Users) {
		t.Errorf("redis changed: before %+v, after %+v", before, after)
	}
	for k, v := range before.Orders {
		if after.Orders[k] != v {
			t.Errorf("redis order %s: %q before, %q after", k, v, after.Orders[k])
		}
	}
}

// A database failure after the gate said yes gives the use back: Redis is as it was, and the
// answer is 503 (the write failed) or the database's verdict (it refused).
func TestDatabaseFailureAfterGateGivesTheUseBack(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	b.CreateVoucher(t, backendtest.Voucher{Code: "FAIL", Discount: 10, TotalLimit: 5, FlashSale: true})
	if a := reserve(t, b, "FAIL", "ok", "ok-1", 100); a.status != 201 {
		t.Fatalf("first reservation: %+v", a)
	}
	exec(t, b, `CREATE FUNCTION refuse_doomed() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.customer_id = 'doomed' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NEW; END $$`)
	exec(t, b, `CREATE TRIGGER refuse_doomed BEFORE INSERT ON redemptions FOR EACH ROW EXECUTE FUNCTION refuse_doomed()`)

	before := readRedis(t, b, "FAIL")
	if a := reserve(t, b, "FAIL", "doomed", "doomed-1", 100); a.status != 503 || a.code != wire.CodeUnavailable {
		t.Errorf("write fails: %+v; want 503 UNAVAILABLE", a)
	}
	sameRedis(t, before, readRedis(t, b, "FAIL"))

	// The database's own guard refuses what Redis allowed: a redemption Redis does not know.
	exec(t, b, `UPDATE vouchers SET used_count = used_count + 1 WHERE code = 'FAIL'`)
	exec(t, b, `INSERT INTO redemptions (voucher_code, per_user_limit, customer_id, order_id, slot, status,
		order_amount, discount_amount, reserved_at, hold_expires_at)
		VALUES ('FAIL', 1, 'twin', 'twin-db', 1, 'RESERVED', 100, 10, now(), now() + interval '1 hour')`)
	if a := reserve(t, b, "FAIL", "twin", "twin-2", 100); a.status != 409 || a.code != wire.CodeAlreadyUsed {
		t.Errorf("database refuses: %+v; want 409 ALREADY_USED", a)
	}
	sameRedis(t, before, readRedis(t, b, "FAIL"))
	// twin-db was written behind Redis's back (R2 does not hold for it); release it to check the rest
	exec(t, b, `UPDATE redemptions SET status = 'RELEASED', released_at = now() WHERE order_id = 'twin-db'`)
	exec(t, b, `UPDATE vouchers SET used_count = used_count - 1 WHERE code = 'FAIL'`)
	b.CheckInvariants(t, "FAIL", []string{"ok-1"})
}

// A retry that finds its order held in Redis answers 201 only once the first attempt's row is
// committed (D4), and takes a use anew when the first attempt gave its use back.
func TestRetryWhileFirstAttemptInFlight(t *testing.T) {
	b := backendtest.Start(t, backendtest.Config(t))
	v := backendtest.Voucher{Code: "SLOW", Discount: 10, TotalLimit: 5, FlashSale: true}
	b.CreateVoucher(t, v)
	recordSale(t, v, b)
	exec(t, b, `CREATE SEQUENCE flaky_attempts`)
	exec(t, b, `CREATE FUNCTION slow_down() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.customer_id = 'slow' THEN PERFORM pg_sleep(0.4); END IF;
			IF NEW.customer_id = 'flaky' AND nextval('flaky_attempts') = 1 THEN
				PERFORM pg_sleep(0.4); RAISE EXCEPTION 'first attempt fails';
			END IF;
			RETURN NEW;
		END $$`)
	exec(t, b, `CREATE TRIGGER slow_down BEFORE INSERT ON redemptions FOR EACH ROW EXECUTE FUNCTION slow_down()`)

	for _, c := range []struct{ customer, order string }{{"slow", "slow-1"}, {"flaky", "flaky-1"}} {
		var first answer
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			first = reserve(t, b, "SLOW", c.customer, c.order, 100)
		}()
		testkit.Eventually(t, "the first attempt holds its use in redis, its write on the way", func() bool {
			_, held, err := b.App.Gate.Holding(context.Background(), "SLOW", c.order)
			return err == nil && held
		})
		retry := reserve(t, b, "SLOW", c.customer, c.order, 100)
		var committed bool
		if err := b.App.Pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM redemptions WHERE order_id = $1 AND status = 'RESERVED')`, c.order).Scan(&committed); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if retry.status != 201 || !committed {
			t.Errorf("%s: retry answered %+v, row committed when it answered: %v", c.order, retry, committed)
		}
		wantFirst := 201
		if c.customer == "flaky" {
			wantFirst = 503
		}
		if first.status != wantFirst {
			t.Errorf("%s: first attempt %+v; want %d", c.order, first, wantFirst)
		}
	}
	b.CheckInvariants(t, "SLOW", []string{"slow-1", "flaky-1"})
}

// With Redis stopped, flash reservations answer 503 with Retry-After (no pile-up: each is
// answered, none waits for Redis to come back) while normal vouchers keep working. How fast
// the 503 comes is the gate's timeout, not something a test can time on a shared machine.
func TestRedisStoppedFlashUnavailableNormalWorks(t *testing.T) {
	redis := testkit.StartRedis(t)
	cfg := backendtest.Config(t)
	cfg.RedisURL = redis.URL()
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "FLASH", Discount: 10, TotalLimit: 100, FlashSale: true})
	b.CreateVoucher(t, backendtest.Voucher{Code: "NORMAL", Discount: 10, TotalLimit: 100})
	if a := reserve(t, b, "FLASH", "c0", "f0", 100); a.status != 201 {
		t.Fatalf("flash before the fault: %+v", a)
	}
	redis.Stop()

	client := &fasthttp.Client{}
	for i := range 20 {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		req.Header.SetMethod("POST")
		req.SetRequestURI(b.URL + "/vouchers/FLASH/reservations")
		req.SetBodyString(`{"customerId":"c` + itoa(i+1) + `","orderId":"f` + itoa(i+1) + `","orderAmount":100}`)
		if err := client.DoTimeout(req, resp, testkit.WaitBound); err != nil {
			t.Fatalf("flash reservation with redis stopped: no answer: %v", err)
		}
		if resp.StatusCode() != 503 || len(resp.Header.Peek("Retry-After")) == 0 {
			t.Errorf("flash with redis stopped: %d %s; want 503 with Retry-After", resp.StatusCode(), resp.Body())
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	for i := range 5 {
		if a := reserve(t, b, "NORMAL", "n"+itoa(i), "n"+itoa(i), 100); a.status != 201 {
			t.Errorf("normal voucher with redis stopped: %+v", a)
		}
	}
	redis.Start() // empty: the next reservation loads the voucher from the database
	// the client's pool probes a dead server once a second: the first tries may get 503
	if back := reserveAsClient(t, b, "FLASH", "back", "f-back", 100); back.status != 201 {
		t.Errorf("flash after redis returned: %+v", back)
	}
	b.CheckInvariants(t, "FLASH", []string{"f0", "f-back"})
	b.CheckInvariants(t, "NORMAL", nil)
}

// With PostgreSQL stopped, a flash winner's write fails and its use goes back to Redis.
func TestDatabaseStoppedGivesTheUseBack(t *testing.T) {
	pg := testkit.StartPostgres(t)
	cfg := backendtest.Config(t)
	cfg.DatabaseURL = testkit.Database(t, pg.URL())
	b := backendtest.Start(t, cfg)
	b.CreateVoucher(t, backendtest.Voucher{Code: "PGDOWN", Discount: 10, TotalLimit: 10, FlashSale: true})
	if a := reserve(t, b, "PGDOWN", "c0", "o0", 100); a.status != 201 {
		t.Fatalf("before the fault: %+v", a)
	}
	before := readRedis(t, b, "PGDOWN")
	pg.Stop()
	for i := range 5 {
		if a := reserve(t, b, "PGDOWN", "d"+itoa(i), "d"+itoa(i), 100); a.status != 503 {
			t.Errorf("database stopped: %+v; want 503", a)
		}
	}
	sameRedis(t, before, readRedis(t, b, "PGDOWN"))
	pg.Start()
	// the pool notices the restarted server within a few tries
	if got := reserveAsClient(t, b, "PGDOWN", "after", "after-1", 100); got.status != 201 {
		t.Errorf("after the database returned: %+v", got)
	}
	b.CheckInvariants(t, "PGDOWN", []string{"o0", "after-1"})
}

func itoa(i int) string { return fmt.Sprint(i) }
