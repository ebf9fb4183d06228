package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A stand-in checkout API as a process of its own: the test binary run again with upstreamEnv
// set serves it (upstreamMain) instead of running the tests. Between the edge and it there is
// only the kernel's TCP, as in front of a shop's real service: its idle timeout closes kept-alive
// connections on its own clock, and its writes go out when its own scheduler runs them.

// upstreamEnv, set to a net/http idle timeout ("1s"), makes the test binary the stand-in.
const upstreamEnv = "VOUCHERGATE_TEST_UPSTREAM_IDLE"

func TestMain(m *testing.M) {
	if idle := os.Getenv(upstreamEnv); idle != "" {
		upstreamMain(idle)
		return
	}
	os.Exit(m.Run())
}

// upstreamStats is what the stand-in counted, from GET /stats.
type upstreamStats struct {
	Conns int32 // connections accepted, the one asking for the stats included
	Posts int32 // POSTs answered
}

// upstreamMain serves the stand-in on a free 127.0.0.1 port, writes "listening <addr>" on
// stdout, and exits when stdin closes (its test is done, or gone). It answers:
//   - /stats: upstreamStats as JSON;
//   - /events: server-sent events 0 to 7, each sent once the one before was acknowledged by a
//     GET /ack (asked of the stand-in directly), so events held back by the edge stall it;
//   - anything else: "<method> <body>".
func upstreamMain(idleText string) {
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
	var conns, posts atomic.Int32
	acks := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(upstreamStats{Conns: conns.Load(), Posts: posts.Load()})
	})
	mux.HandleFunc("/ack", func(w http.ResponseWriter, r *http.Request) {
		select {
		case acks <- struct{}{}:
		case <-time.After(5 * time.Second):
			http.Error(w, "no event waits for an ack", http.StatusConflict)
		}
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i)
			w.(http.Flusher).Flush()
			select {
			case <-acks:
			case <-time.After(5 * time.Second):
				return // the client never saw it: the edge held it back
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == "POST" {
			posts.Add(1)
		}
		fmt.Fprintf(w, "%s %s", r.Method, body)
	})
	srv := &http.Server{Handler: mux, IdleTimeout: idle, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	_ = srv.Serve(ln)
}

// upstreamProcess is a running stand-in.
type upstreamProcess struct {
	addr   string
	direct *http.Client // asks the stand-in itself, not through the edge
}

// startUpstreamProcess runs the stand-in with net/http's idle timeout idle until the test ends.
func startUpstreamProcess(t *testing.T, idle time.Duration) *upstreamProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), upstreamEnv+"="+idle.String())
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
		t.Fatalf("the upstream process said %q, %v; want its address", line, err)
	}
	return &upstreamProcess{addr: addr, direct: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// stats asks the stand-in what it counted, the connection asking excluded.
func (u *upstreamProcess) stats(t *testing.T) upstreamStats {
	t.Helper()
	resp, err := u.direct.Get("http://" + u.addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s upstreamStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	s.Conns--
	return s
}

// ack tells the stand-in's event stream that the last event arrived.
func (u *upstreamProcess) ack(t *testing.T) {
	t.Helper()
	resp, err := u.direct.Get("http://" + u.addr + "/ack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ack: %d", resp.StatusCode)
	}
}
