package testkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A stand-in checkout API as a process of its own, for the edge's pass-through tests: the test
// binary run again with checkoutStandInEnv set serves it instead of running the tests. Between
// the edge and it there is only the kernel's TCP, as in front of a shop's real service: its idle
// timeout closes kept-alive connections on its own clock, its writes go out when its own
// scheduler runs them, and a client's abort reaches it only as its connection closing.

// checkoutStandInEnv, set to a net/http idle timeout ("1s"; "0s": net/http's default), makes
// the test binary the stand-in.
const checkoutStandInEnv = "VOUCHERGATE_TEST_CHECKOUT_STANDIN_IDLE"

// CheckoutStandInStats is what the stand-in counted, from GET /stats.
type CheckoutStandInStats struct {
	Conns     int32 // connections accepted, those of the stats and acks asked of it excluded
	Posts     int32 // POSTs answered
	Cancelled int32 // requests whose connection closed while their answer waited (wait=)
}

// RunCheckoutStandInIfAsked serves the stand-in and exits when the test binary was started as
// one (StartCheckoutStandIn), and returns at once otherwise. A test package that starts the
// stand-in calls it first thing in its TestMain.
//
// The stand-in listens on a free 127.0.0.1 port, writes "listening <addr>" on stdout, and
// exits when stdin closes (its test is done, or gone). It answers:
//   - /stats: CheckoutStandInStats as JSON;
//   - /events: server-sent events 0 to 7, each sent once the one before was acknowledged by a
//     GET /ack (asked of the stand-in directly), so events held back by a proxy stall it;
//   - /ws: a WebSocket echo, each text frame answered "echo: " and its payload; 426 without
//     an upgrade;
//   - /headers: the request's header as JSON, lower-case names to their values joined by ", ";
//   - any other path, shaped by its query: header=N adds an X-Big header of N bytes; first=1
//     starts an event stream ("data: first") at once; wait=D then waits D (a request whose
//     connection closes meanwhile is counted Cancelled); size=N then sends N bytes in pieces of
//     piece= bytes (64 KiB) every every= (none), with a Content-Length unless chunked=1;
//     without size=, the body is "<method> <request body>".
func RunCheckoutStandInIfAsked() {
	idleText := os.Getenv(checkoutStandInEnv)
	if idleText == "" {
		return
	}
	idle, err := time.ParseDuration(idleText)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := &standIn{acks: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", s.stats)
	mux.HandleFunc("/ack", s.ack)
	mux.HandleFunc("/events", s.events)
	mux.HandleFunc("/ws", webSocketEcho)
	mux.HandleFunc("/headers", echoHeaders)
	mux.HandleFunc("/", s.answer)
	srv := &http.Server{Handler: mux, IdleTimeout: idle, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	_ = srv.Serve(ln)
	os.Exit(0)
}

// standIn is the stand-in's state.
type standIn struct {
	conns, posts, cancelled atomic.Int32
	direct                  atomic.Int32 // stats and acks asked, each on a connection of its own
	acks                    chan struct{}
}

func (s *standIn) stats(w http.ResponseWriter, _ *http.Request) {
	direct := s.direct.Add(1)
	_ = json.NewEncoder(w).Encode(CheckoutStandInStats{Conns: s.conns.Load() - direct, Posts: s.posts.Load(), Cancelled: s.cancelled.Load()})
}

func (s *standIn) ack(w http.ResponseWriter, _ *http.Request) {
	s.direct.Add(1)
	select {
	case s.acks <- struct{}{}:
	case <-time.After(5 * time.Second):
		http.Error(w, "no event waits for an ack", http.StatusConflict)
	}
}

func (s *standIn) events(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 8 {
		fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i)
		w.(http.Flusher).Flush()
		select {
		case <-s.acks:
		case <-time.After(5 * time.Second):
			return // the client never saw it: the proxy held it back
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *standIn) answer(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	body, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost {
		s.posts.Add(1)
	}
	if n, _ := strconv.Atoi(q.Get("header")); n > 0 {
		w.Header().Set("X-Big", strings.Repeat("b", n))
	}
	if q.Get("first") == "1" {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
	}
	if wait, _ := time.ParseDuration(q.Get("wait")); wait > 0 {
		select {
		case <-r.Context().Done():
			s.cancelled.Add(1)
			return
		case <-time.After(wait):
		}
	}
	size, _ := strconv.Atoi(q.Get("size"))
	if size <= 0 {
		fmt.Fprintf(w, "%s %s", r.Method, body)
		return
	}
	piece, _ := strconv.Atoi(q.Get("piece"))
	if piece <= 0 {
		piece = 64 << 10
	}
	every, _ := time.ParseDuration(q.Get("every"))
	if q.Get("chunked") != "1" {
		w.Header().Set("Content-Length", strconv.Itoa(size))
	}
	trickle(w, size, piece, every)
}

// trickle writes size bytes in pieces of piece every every, flushing each.
func trickle(w http.ResponseWriter, size, piece int, every time.Duration) {
	buf := make([]byte, piece)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	flusher := w.(http.Flusher)
	for sent := 0; sent < size; sent += piece {
		if _, err := w.Write(buf[:min(piece, size-sent)]); err != nil {
			return
		}
		flusher.Flush()
		time.Sleep(every)
	}
}

func echoHeaders(w http.ResponseWriter, r *http.Request) {
	h := map[string]string{"host": r.Host}
	for name, values := range r.Header {
		h[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	_ = json.NewEncoder(w).Encode(h)
}

func webSocketEcho(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "websocket" || r.Header.Get("Sec-WebSocket-Key") == "" {
		http.Error(w, "upgrade required", http.StatusUpgradeRequired)
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		WebSocketAccept(r.Header.Get("Sec-WebSocket-Key")))
	_ = rw.Flush()
	for {
		msg, err := ReadWebSocketFrame(rw)
		if err != nil {
			return
		}
		_, _ = conn.Write(WebSocketTextFrame(append([]byte("echo: "), msg...), nil))
	}
}

// CheckoutStandIn is a running stand-in checkout API (RunCheckoutStandInIfAsked).
type CheckoutStandIn struct {
	Addr   string
	direct *http.Client // asks the stand-in itself, not through the edge
}

// StartCheckoutStandIn runs the stand-in, closing idle keep-alive connections after idle (0:
// net/http's default), until the test ends.
func StartCheckoutStandIn(t testing.TB, idle time.Duration) *CheckoutStandIn {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), checkoutStandInEnv+"="+idle.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("the stand-in checkout API said %q, %v; want its address (does TestMain call RunCheckoutStandInIfAsked?)", line, err)
	}
	return &CheckoutStandIn{Addr: addr, direct: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// Stats asks the stand-in what it counted.
func (u *CheckoutStandIn) Stats(t testing.TB) CheckoutStandInStats {
	t.Helper()
	resp, err := u.direct.Get("http://" + u.Addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s CheckoutStandInStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Ack tells the stand-in's event stream that the last event arrived.
func (u *CheckoutStandIn) Ack(t testing.TB) {
	t.Helper()
	resp, err := u.direct.Get("http://" + u.Addr + "/ack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ack: %d", resp.StatusCode)
	}
}
