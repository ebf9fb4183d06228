package faulttest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouchergate/backend/backendtest"
	"vouchergate/backend/backendtest/history"
	"vouchergate/shared/wire"
	"vouchergate/testkit"
)

// A process gets SIGTERM in the middle of a flash sale whose clients hold keep-alive
// connections and whose winners wait for a slowed database. What "shut down gracefully" means,
// checked request by request (keepAliveSale):
//
//   - a request written before the signal gets a whole answer: 201, 409 or 503, never a reset or
//     an EOF after it was sent;
//   - a request written after the signal gets an answer, or its connection could not be made
//     (refused), or its connection ended with not one byte of an answer; such a request was not
//     acted on: an order none of whose requests was answered has no row and no use in Redis, so
//     the client may send it again. An edge whose backend has gone answers 503, or 502 "could
//     not be reached" when its dial was refused, which is retryable the same way;
//   - the process exits with status 0 within its grace and 2 s, logging its shutdown;
//   - then no reservation is half done: every 201 is backed by a committed row (D4), used_count
//     counts the active rows (D1), and Redis holds exactly the active orders (no use hanging);
//   - after a restart every granted order's retry answers 201, and the rest of the voucher sells.
func TestSIGTERMMidSale(t *testing.T) {
	const grace = 5 * time.Second
	t.Run("backend", func(t *testing.T) {
		cfg := backendtest.Config(t)
		checker := backendtest.Start(t, cfg)
		createFlash(t, checker, "TERM", 400, 2)
		slowInserts(t, checker)
		proc := backendtest.StartProcess(t, cfg, "VG_SHUTDOWN_GRACE="+grace.String(), "VG_DB_MAX_CONNS=4")
		s := terminateMidSale(t, checker, proc, proc.Addr(), "TERM", grace)
		proc.Start()
		afterRestart(t, checker, proc.URL(), s)
	})
	t.Run("backend behind an edge", func(t *testing.T) {
		cfg := backendtest.Config(t)
		checker := backendtest.Start(t, cfg)
		createFlash(t, checker, "TERMEDGE", 400, 2)
		slowInserts(t, checker)
		proc := backendtest.StartProcess(t, cfg, "VG_SHUTDOWN_GRACE="+grace.String(), "VG_DB_MAX_CONNS=4")
		edge := backendtest.StartEdgeProcess(t, cfg, proc.Addr())
		// the edge stays up: every request to it is answered, those after the backend left by
		// the edge itself (503)
		s := terminateMidSale(t, checker, proc, edge.Addr(), "TERMEDGE", grace)
		proc.Start()
		testkit.Eventually(t, "the edge finds the backend back", func() bool {
			resp, err := http.Get(edge.URL() + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		afterRestart(t, checker, edge.URL(), s)
	})
	t.Run("edge", func(t *testing.T) {
		cfg := backendtest.Config(t)
		checker := backendtest.Start(t, cfg)
		createFlash(t, checker, "EDGETERM", 400, 2)
		slowInserts(t, checker)
		edge := backendtest.StartEdgeProcess(t, cfg, checker.Addr, "VG_EDGE_SHUTDOWN_GRACE="+grace.String())
		s := terminateMidSale(t, checker, edge, edge.Addr(), "EDGETERM", grace)
		edge.Start()
		afterRestart(t, checker, edge.URL(), s)
	})
}

// terminateMidSale runs a sale of code through addr, SIGTERMs proc once a third of the voucher
// is granted, and checks the answers, the exit and both stores. It returns the sale with its
// granted orders.
func terminateMidSale(t *testing.T, checker *backendtest.Backend, proc *backendtest.Process, addr, code string, grace time.Duration) *keepAliveSale {
	t.Helper()
	total := totalLimit(t, checker.App.Pool, code)
	s := startKeepAliveSale(t, addr, code, storm("", 3*total, 13), 100)
	s.waitGranted(t, int64(total/3))
	signalAt := time.Now()
	status, took := proc.Terminate(grace + 2*time.Second)
	t.Logf("exited with status %d %v after SIGTERM", status, took.Round(time.Millisecond))
	if status != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", status)
	}
	sent := s.wait(t)
	if out := proc.Output(); !strings.Contains(out, "shutting down") || !strings.Contains(out, "shut down") {
		t.Errorf("the process did not log the start and the end of its shutdown")
	}

	db := rows(t, checker.App.Pool, code)
	g := backendtest.ReadGate(t, checker.App.Redis, checker.Config.RedisPrefix, code)
	acted := map[string]bool{} // orders a request of which the server may have acted on
	for _, r := range sent {
		if r.written && r.status != 0 && !r.notForwarded {
			acted[r.order] = true
		}
	}
	var before, after, cut, refused, unsent, inFlight int
	for _, r := range sent {
		if r.written && r.wroteAt.Before(signalAt) && r.doneAt.After(signalAt) {
			inFlight++
		}
		switch {
		case !r.written:
			unsent++
			if r.refused {
				refused++
			}
			continue
		case r.wroteAt.Before(signalAt):
			before++
		default:
			after++
		}
		switch {
		case r.status == 0 && r.got > 0:
			t.Errorf("order %s: request got %d bytes of an answer, then %v", r.order, r.got, r.err)
		case r.status == 0 && r.wroteAt.Before(signalAt):
			t.Errorf("order %s: request written %v before the signal got no answer: %v",
				r.order, signalAt.Sub(r.wroteAt), r.err)
		case r.status == 0:
			cut++
		}
		if (r.status == 0 || r.notForwarded) && !acted[r.order] {
			if row, ok := db[r.order]; ok {
				t.Errorf("order %s: no request of it was acted on, yet it has a row (%s)", r.order, row.status)
			}
			if _, ok := g.Orders[r.order]; ok {
				t.Errorf("order %s: no request of it was acted on, yet it holds a use in redis", r.order)
			}
		}
	}
	t.Logf("%d requests written before the signal (%d of them in flight at the signal), %d after (%d of those closed unanswered); %d not sent (%d refused at dial)",
		before, inFlight, after, cut, unsent, refused)
	if inFlight == 0 {
		t.Errorf("the signal caught no request in flight")
	}
	outs := make([]outcome, 0, len(sent))
	for _, r := range sent {
		if r.written {
			outs = append(outs, r.outcome())
		}
	}
	t.Logf("answers: %s", tally(outs))
	granted := checkAnswers(t, checker.App.Pool, code, outs)
	checker.CheckInvariants(t, code, granted)
	checkRedisEqualsDB(t, checker, code)
	s.granted = granted
	s.customerOf = customers(outs)
	return s
}

// afterRestart retries every order s granted through base, then sells the rest of the voucher.
func afterRestart(t *testing.T, checker *backendtest.Backend, base string, s *keepAliveSale) {
	t.Helper()
	code := s.code
	if _, err := checker.App.Pool.Exec(context.Background(), `DROP TRIGGER slow_insert ON redemptions`); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, base)
	retryGranted(t, c, code, s.granted, s.customerOf)
	sellRest(t, c, checker.App.Pool, code, "rest-")
	checker.CheckInvariants(t, code, nil)
	checkRedisEqualsDB(t, checker, code)
}

// slowInserts makes each redemption insert take 5 ms, so that batches of winners are being
// written when the signal comes.
func slowInserts(t *testing.T, b *backendtest.Backend) {
	t.Helper()
	for _, sql := range []string{
		`CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_insert BEFORE INSERT ON redemptions FOR EACH ROW EXECUTE FUNCTION slow_insert()`,
	} {
		if _, err := b.App.Pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// sent is one request of a keep-alive sale: whether and when it was written whole, and what came
// back: a status (0: none), or the error that ended the connection and how many bytes of an
// answer had come by then.
type sent struct {
	attempt
	answer
	written, refused bool
	notForwarded     bool // answered by an edge that could not connect to a backend (502)
	wroteAt, doneAt  time.Time
	got              int64
	err              error
}

func (r sent) outcome() outcome {
	o := outcome{attempt: r.attempt, answer: r.answer, sentAt: r.wroteAt, answeredAt: r.doneAt, tries: 1}
	if r.notForwarded {
		o.status = 0 // retryable: the edge did not send it on
	}
	if o.status == 0 {
		o.lost = 1
	}
	return o
}

// keepAliveSale is a sale by clients that each keep one connection and send their requests on
// it one after another, reconnecting when an answer says Connection: close or the connection
// ends. A client whose dial is refused stops: the server has gone.
type keepAliveSale struct {
	addr, code string
	attempts   []attempt
	rec        *history.Recorder // what each request was told
	next       atomic.Int64
	grantedN   atomic.Int64
	done       chan struct{}

	mu   sync.Mutex
	sent []sent

	granted    []string          // after the checks
	customerOf map[string]string // after the checks
}

// startKeepAliveSale connects clients to addr, each sending one GET /healthz first so that its
// connection is open and served before the sale, then starts the sale, each reservation
// recorded in t's history.
func startKeepAliveSale(t *testing.T, addr, code string, attempts []attempt, clients int) *keepAliveSale {
	t.Helper()
	s := &keepAliveSale{addr: addr, code: code, attempts: attempts, rec: history.For(t), done: make(chan struct{})}
	conns := make([]*kaConn, clients)
	for i := range conns {
		c, err := dialKA(addr)
		if err != nil {
			t.Fatalf("connect client %d: %v", i, err)
		}
		if status, err := c.healthz(); err != nil || status != 200 {
			t.Fatalf("client %d: GET /healthz: %d %v", i, status, err)
		}
		conns[i] = c
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.client(c)
		}()
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return s
}

func (s *keepAliveSale) client(c *kaConn) {
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		i := s.next.Add(1) - 1
		if i >= int64(len(s.attempts)) {
			return
		}
		a := s.attempts[i]
		r := sent{attempt: a}
		if c == nil {
			var err error
			if c, err = dialKA(s.addr); err != nil {
				r.refused, r.err = true, err
				s.record(r)
				return
			}
		}
		call := s.rec.Begin(history.Op{Kind: history.Reserve, Voucher: s.code, Customer: a.customer, Order: a.order, Amount: orderAmount})
		r = c.reserve(s.code, a)
		if r.status == 0 {
			call.Info(fmt.Sprintf("no answer: %v", r.err))
		} else {
			endCall(call, r.status, r.code, r.discount)
		}
		if r.status == 201 {
			s.grantedN.Add(1)
		}
		s.record(r)
		if r.status == 0 || c.closing {
			c.Close()
			c = nil
		}
	}
}

func (s *keepAliveSale) record(r sent) {
	s.mu.Lock()
	s.sent = append(s.sent, r)
	s.mu.Unlock()
}

// waitGranted returns once n requests were granted, failing the test if the sale ends first.
func (s *keepAliveSale) waitGranted(t *testing.T, n int64) {
	t.Helper()
	for s.grantedN.Load() < n {
		select {
		case <-s.done:
			t.Fatalf("the sale ended with %d granted, before %d were", s.grantedN.Load(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wait returns every request once the clients are done (each request's answer is bounded).
func (s *keepAliveSale) wait(t *testing.T) []sent {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the keep-alive sale did not end")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// kaConn is one keep-alive client connection, counting the bytes read since the last request
// was written.
type kaConn struct {
	net.Conn
	r       *bufio.Reader
	got     int64
	closing bool // the last answer said Connection: close
}

func dialKA(addr string) (*kaConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	c := &kaConn{Conn: nc}
	c.r = bufio.NewReader(countingReader{c})
	return c, nil
}

type countingReader struct{ c *kaConn }

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	r.c.got += int64(n)
	return n, err
}

// roundTrip writes req whole, then reads one answer, within 30 s.
func (c *kaConn) roundTrip(req string) (resp *http.Response, body []byte, wroteAt time.Time, written bool, err error) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	c.got = 0
	if _, err = io.WriteString(c.Conn, req); err != nil {
		return nil, nil, time.Time{}, false, fmt.Errorf("write: %w", err)
	}
	wroteAt = time.Now()
	resp, err = http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, nil, wroteAt, true, fmt.Errorf("read: %w", err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, nil, wroteAt, true, fmt.Errorf("read body: %w", err)
	}
	c.closing = resp.Close
	return resp, body, wroteAt, true, nil
}

func (c *kaConn) healthz() (int, error) {
	resp, _, _, _, err := c.roundTrip("GET /healthz HTTP/1.1\r\nHost: vouchergate\r\n\r\n")
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// reserve sends one reservation and reads its answer.
func (c *kaConn) reserve(code string, a attempt) sent {
	body, _ := json.Marshal(map[string]any{"customerId": a.customer, "orderId": a.order, "orderAmount": orderAmount})
	req := fmt.Sprintf("POST /vouchers/%s/reservations HTTP/1.1\r\nHost: vouchergate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		code, len(body), body)
	r := sent{attempt: a}
	resp, raw, wroteAt, written, err := c.roundTrip(req)
	r.written, r.wroteAt, r.doneAt, r.got = written, wroteAt, time.Now(), c.got
	if err != nil {
		r.err = err
		if errors.Is(err, io.ErrUnexpectedEOF) && r.got == 0 {
			r.err = fmt.Errorf("%w (closed before any answer)", err)
		}
		return r
	}
	r.status = resp.StatusCode
	var b struct {
		Error    string `json:"error"`
		Message  string `json:"message"`
		Discount int64  `json:"discountAmount"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		b.Error = "unreadable body: " + string(raw)
	}
	r.code, r.discount = b.Error, b.Discount
	switch {
	case r.status == 503 && b.Error != wire.CodeUnavailable:
		r.code = "503 " + b.Error
	case r.status == 502:
		r.code += ": " + b.Message
		r.notForwarded = b.Message == "the upstream could not be reached"
	}
	return r
}

// A request still in flight does not hold the shutdown past the grace: the backend exits after
// its grace and within 2 s more, with status 1 and the cut reported in its log (the request's
// own timeouts, 10 s and 30 s here, would let it hold the process that long).
func TestSIGTERMBoundedByGrace(t *testing.T) {
	const grace = time.Second
	cfg := backendtest.Config(t)
	checker := backendtest.Start(t, cfg)
	checker.CreateVoucher(t, backendtest.Voucher{Code: "SLOW", Discount: discount, TotalLimit: 10})
	proc := backendtest.StartProcess(t, cfg, "VG_SHUTDOWN_GRACE="+grace.String())

	// The test holds the voucher's row, so the reservation waits on its lock inside the
	// handler: in flight for certain when the signal comes, whatever the machine's load.
	ctx := context.Background()
	tx, err := checker.App.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM vouchers WHERE code = 'SLOW' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", proc.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"customerId":1,"orderId":"O-1","orderAmount":100000}`
	if _, err := fmt.Fprintf(c, "POST /vouchers/SLOW/reservations HTTP/1.1\r\nHost: vouchergate\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the reservation waits on the voucher's row", func() bool {
		var waiting int
		err := checker.App.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	})

	status, took := proc.Terminate(grace + 2*time.Second)
	t.Logf("exited with status %d %v after SIGTERM", status, took.Round(time.Millisecond))
	if status != 1 {
		t.Errorf("exit status %d with a request cut at the grace; want 1", status)
	}
	if took < grace {
		t.Errorf("exited %v after SIGTERM with a request in flight; want the grace, %v", took, grace)
	}
	if out := proc.Output(); !strings.Contains(out, "requests still in flight after the grace") {
		t.Errorf("the log does not say a request was cut at the grace")
	}
}
