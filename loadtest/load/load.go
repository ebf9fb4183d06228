// Package load drives HTTP/1.1 reservations at a server on this machine and measures what it
// answers: requests per second, latency percentiles and statuses.
//
// It is a closed loop: each connection sends a request, reads the whole answer, and sends the
// next, so the server's answer rate is what is measured. Requests are written from a reused
// buffer and answers parsed by hand, so the generator spends little of the CPU it shares with
// the server, and the same generator serves every server compared.
package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Settings say how hard and how long to load.
type Settings struct {
	Conns    int           // connections, each with one request in flight
	Duration time.Duration // measured time
	Warmup   time.Duration // unmeasured time before it
	Code     string        // voucher code in the path
	Path     string        // the path posted to instead of /vouchers/{Code}/reservations (a checkout path)
	Prefix   string        // orderId prefix; each request gets prefix + a sequence number
	// Customers is the customerId prefix: each request names a new customer, prefix +
	// connection + sequence number ("c-" if empty). A run that must not meet an earlier run's
	// customers (per-customer limits) gives its own.
	Customers string
}

// Result is what one run measured.
type Result struct {
	Requests int64
	Errors   int64 // connections that failed; each ends its loop
	Elapsed  time.Duration
	Statuses map[int]int64
	Latency  Histogram
	Won      Histogram // the 201 answers' latency alone
}

// RPS is requests answered per second.
func (r Result) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// ErrNotLocal is returned for a target that is not on 127.0.0.1: the loops run only there.
var ErrNotLocal = errors.New("load: the target must be 127.0.0.1:port")

// Run loads addr (127.0.0.1:port) with reservations and returns what it measured.
func Run(ctx context.Context, addr string, s Settings) (Result, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return Result{}, ErrNotLocal
	}
	if s.Conns < 1 || s.Duration <= 0 {
		return Result{}, fmt.Errorf("load: need at least one connection and a positive duration")
	}
	conns := make([]net.Conn, s.Conns)
	for i := range conns {
		if conns[i], err = net.DialTimeout("tcp", addr, time.Second); err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return Result{}, fmt.Errorf("load: connect to %s: %w", addr, err)
		}
	}
	start := time.Now()
	measureFrom := start.Add(s.Warmup)
	end := measureFrom.Add(s.Duration)
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	workers := make([]worker, s.Conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		w.statuses = map[int]int64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns[i].Close()
			w.run(ctx, conns[i], s, i, measureFrom, end)
		}()
	}
	wg.Wait()

	r := Result{Statuses: map[int]int64{}, Elapsed: s.Duration}
	for i := range workers {
		w := &workers[i]
		r.Requests += w.requests
		if w.err != nil {
			r.Errors++
		}
		for st, n := range w.statuses {
			r.Statuses[st] += n
		}
		r.Latency.Merge(&w.latency)
		r.Won.Merge(&w.won)
	}
	if r.Requests == 0 && r.Errors > 0 {
		return r, fmt.Errorf("load: every connection failed; first: %w", firstErr(workers))
	}
	return r, nil
}

func firstErr(ws []worker) error {
	for i := range ws {
		if ws[i].err != nil {
			return ws[i].err
		}
	}
	return nil
}

type worker struct {
	requests int64
	statuses map[int]int64
	latency  Histogram
	won      Histogram
	err      error
}

func (w *worker) run(ctx context.Context, conn net.Conn, s Settings, id int, measureFrom, end time.Time) {
	_ = conn.SetDeadline(end.Add(5 * time.Second)) // no loop outlives its run
	br := bufio.NewReaderSize(conn, 16<<10)
	path := s.Path
	if path == "" {
		path = "/vouchers/" + s.Code + "/reservations"
	}
	rb := newRequests(path, s.Prefix, s.Customers, id)
	for seq := 0; ctx.Err() == nil; seq++ {
		t0 := time.Now()
		if _, err := conn.Write(rb.next(seq)); err != nil {
			w.fail(ctx, err)
			return
		}
		status, _, err := readAnswer(br)
		if err != nil {
			w.fail(ctx, err)
			return
		}
		if t0.After(measureFrom) && t0.Before(end) {
			lat := time.Since(t0)
			w.latency.Record(lat)
			if status == 201 {
				w.won.Record(lat)
			}
			w.requests++
			w.statuses[status]++
		}
	}
}

// requests writes one connection's reservations, each of a new customer and a new order,
// into a reused buffer.
type requests struct {
	head, req, body []byte
	orders, custs   []byte // orderId and customerId up to the sequence number
}

func newRequests(path, orders, customers string, conn int) *requests {
	if customers == "" {
		customers = "c-"
	}
	return &requests{
		head:   []byte("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "),
		req:    make([]byte, 0, 512),
		body:   make([]byte, 0, 256),
		orders: []byte(orders + strconv.Itoa(conn) + "-"),
		custs:  []byte(customers + strconv.Itoa(conn) + "-"),
	}
}

// next returns request seq; it is valid until the next call.
func (r *requests) next(seq int) []byte {
	body := append(r.body[:0], `{"customerId":"`...)
	body = append(body, r.custs...)
	body = strconv.AppendInt(body, int64(seq), 10)
	body = append(body, `","orderId":"`...)
	body = append(body, r.orders...)
	body = strconv.AppendInt(body, int64(seq), 10)
	body = append(body, `","orderAmount":150000}`...)
	req := append(r.req[:0], r.head...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	r.body, r.req = body, append(req, body...)
	return r.req
}

func (w *worker) fail(ctx context.Context, err error) {
	if ctx.Err() == nil { // an error after the end is the deadline closing the loop
		w.err = err
	}
}

var headerContentLength = []byte("content-length:")

// readAnswer reads one answer with a Content-Length body and returns its status and its body
// (nil if larger than br's buffer), valid until the next read from br.
func readAnswer(br *bufio.Reader) (int, []byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, fmt.Errorf("load: bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("load: bad status line %q", line)
	}
	length := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > len(headerContentLength) && bytes.EqualFold(line[:len(headerContentLength)], headerContentLength) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(line[len(headerContentLength):]))); err != nil {
				return 0, nil, fmt.Errorf("load: bad Content-Length %q", line)
			}
		}
	}
	if length < 0 {
		return 0, nil, errors.New("load: answer without Content-Length")
	}
	var body []byte
	if length <= br.Size() {
		if body, err = br.Peek(length); err != nil {
			return 0, nil, err
		}
	}
	if _, err := br.Discard(length); err != nil {
		return 0, nil, err
	}
	return status, body, nil
}
