package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SaleSettings say how to run one flash sale: Conns clients start at once, each sending
// reservations of new customers and new orders, one in flight, until the voucher's Uses
// reservations were granted (or every client was told OUT_OF_STOCK), then for Tail more;
// never longer than Limit.
type SaleSettings struct {
	Conns     int
	Code      string
	Prefix    string // orderId prefix
	Customers string // customerId prefix; see Settings
	Uses      int    // the voucher's total limit: the Uses-th 201 sells it out
	Tail      time.Duration
	Limit     time.Duration
}

// SaleResult is what one sale measured. Times are from the first request sent.
type SaleResult struct {
	Requests   int64
	Errors     int64 // connections that failed; each ends its client
	Statuses   map[int]int64
	OutOfStock int64         // 409 answers naming OUT_OF_STOCK
	SoldOut    time.Duration // when the Uses-th 201 arrived; 0 if fewer were granted
	Elapsed    time.Duration // when the last client stopped
	Limited    bool          // the clients stopped at the Limit, before a sell-out ended the sale
	Won        Histogram     // latency of the 201 answers
	During     Histogram     // latency of every request sent before the sell-out
	After      Histogram     // latency of every request sent after it
}

// Granted is the number of 201 answers.
func (r SaleResult) Granted() int64 { return r.Statuses[201] }

// sent is one request: when it was sent (from the start), how long its answer took.
type sent struct {
	at, took time.Duration
	status   int16
	oos      bool
}

// sale is what the clients of one sale share.
type sale struct {
	s        SaleSettings
	start    time.Time
	hardEnd  time.Time
	granted  atomic.Int64
	toldOOS  atomic.Int64 // clients that were answered OUT_OF_STOCK at least once
	stopAt   atomic.Int64 // unix ns after which no client sends; 0 until sold out
	errs     atomic.Int64
	firstErr atomic.Pointer[error]
}

var outOfStock = []byte("OUT_OF_STOCK")

// Sale runs one sale against addr (127.0.0.1:port) and returns what it measured.
func Sale(ctx context.Context, addr string, s SaleSettings) (SaleResult, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return SaleResult{}, ErrNotLocal
	}
	if s.Conns < 1 || s.Uses < 1 || s.Limit <= 0 {
		return SaleResult{}, fmt.Errorf("load: a sale needs clients, uses and a time limit")
	}
	conns := make([]net.Conn, s.Conns)
	for i := range conns {
		if conns[i], err = net.DialTimeout("tcp", addr, time.Second); err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return SaleResult{}, fmt.Errorf("load: connect to %s: %w", addr, err)
		}
	}
	sl := &sale{s: s}
	logs := make([][]sent, s.Conns)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conns[i].Close()
			<-begin
			logs[i] = sl.client(ctx, conns[i], i)
		}()
	}
	sl.start = time.Now()
	sl.hardEnd = sl.start.Add(s.Limit)
	close(begin)
	wg.Wait()
	r := sl.result(logs)
	if r.Requests == 0 && r.Errors > 0 {
		return r, fmt.Errorf("load: every client failed; first: %w", *sl.firstErr.Load())
	}
	return r, nil
}

// client sends reservations on conn until the sale's end and returns what it sent.
func (sl *sale) client(ctx context.Context, conn net.Conn, id int) []sent {
	_ = conn.SetDeadline(sl.hardEnd.Add(5 * time.Second))
	br := bufio.NewReaderSize(conn, 4<<10)
	rb := newRequests("/vouchers/"+sl.s.Code+"/reservations", sl.s.Prefix, sl.s.Customers, id)
	log := make([]sent, 0, min(2*sl.s.Uses/sl.s.Conns+64, 1<<14))
	told := false
	for seq := 0; ctx.Err() == nil; seq++ {
		t0 := time.Now()
		if t0.After(sl.hardEnd) {
			break
		}
		if at := sl.stopAt.Load(); at != 0 && t0.UnixNano() >= at {
			break
		}
		if _, err := conn.Write(rb.next(seq)); err != nil {
			sl.fail(err)
			break
		}
		status, body, err := readAnswer(br)
		if err != nil {
			sl.fail(err)
			break
		}
		t1 := time.Now()
		oos := status == 409 && bytes.Contains(body, outOfStock)
		log = append(log, sent{at: t0.Sub(sl.start), took: t1.Sub(t0), status: int16(status), oos: oos})
		if status == 201 && sl.granted.Add(1) == int64(sl.s.Uses) {
			sl.stopAt.CompareAndSwap(0, t1.Add(sl.s.Tail).UnixNano())
		}
		if oos && !told {
			told = true
			if sl.toldOOS.Add(1) == int64(sl.s.Conns) { // every client was told: sold out even if short of Uses
				sl.stopAt.CompareAndSwap(0, t1.Add(sl.s.Tail).UnixNano())
			}
		}
	}
	return log
}

func (sl *sale) fail(err error) {
	sl.errs.Add(1)
	sl.firstErr.CompareAndSwap(nil, &err)
}

func (sl *sale) result(logs [][]sent) SaleResult {
	r := SaleResult{Statuses: map[int]int64{}}
	var wins []time.Duration // when each 201 arrived
	first, last := time.Duration(-1), time.Duration(0)
	for _, log := range logs {
		if len(log) == 0 {
			continue
		}
		if first < 0 || log[0].at < first {
			first = log[0].at
		}
		for _, x := range log {
			last = max(last, x.at+x.took)
			if x.status == 201 {
				wins = append(wins, x.at+x.took)
			}
		}
	}
	if first < 0 {
		first = 0
	}
	soldOut := time.Duration(1<<63 - 1)
	if len(wins) >= sl.s.Uses {
		slices.Sort(wins)
		soldOut = wins[sl.s.Uses-1]
		r.SoldOut = soldOut - first
	}
	for _, log := range logs {
		for _, x := range log {
			r.Requests++
			r.Statuses[int(x.status)]++
			if x.oos {
				r.OutOfStock++
			}
			if x.status == 201 {
				r.Won.Record(x.took)
			}
			if x.at < soldOut {
				r.During.Record(x.took)
			} else {
				r.After.Record(x.took)
			}
		}
	}
	r.Errors = sl.errs.Load()
	r.Limited = sl.stopAt.Load() == 0
	r.Elapsed = last - first
	return r
}
