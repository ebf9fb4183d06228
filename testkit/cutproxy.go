package testkit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// CutProxy forwards TCP connections on 127.0.0.1 to PostgreSQL and, once armed, cuts the
// connection that sends a given byte pattern once the server has answered it in full, so the
// answer never comes back. Armed with "commit", it leaves a client not knowing whether its
// transaction committed (the server did commit it). Armed with TerminateAfterOnce, it passes
// the answer on but for its closing ReadyForQuery, in whose place it sends the FATAL 57P01 of a
// server terminating the connection (pg_terminate_backend, a fast shutdown): a COMMIT
// acknowledged, then an error. A pattern is seen in the messages that run a statement when the
// client sends the statement's text each time (pgx's default_query_exec_mode=exec, as URL
// sets), or when it is the name of a statement the connection prepared earlier (pgx's default
// mode sends a cached statement by name).
type CutProxy struct {
	Addr   string // host:port to dial instead of the server
	target string
	ln     net.Listener

	mu        sync.Mutex
	pattern   []byte // nil: forward everything
	terminate bool   // the armed cut answers with a FATAL 57P01 instead of silence
	cuts      int
	conns     map[net.Conn]bool
	settled   chan struct{} // the armed cut's: closed once it is settled (Settled)
}

// StartCutProxy listens on a free 127.0.0.1 port, forwarding to target, until the test ends.
func StartCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: cut proxy: listen: %v", err)
	}
	p := &CutProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is dbURL (a database on the proxied server) reached through the proxy, with pgx sending
// every statement's text (default_query_exec_mode=exec) so that patterns can be seen.
func (p *CutProxy) URL(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(fmt.Sprintf("testkit: cut proxy: %v", err))
	}
	u.Host = p.Addr
	q := u.Query()
	q.Set("default_query_exec_mode", "exec")
	u.RawQuery = q.Encode()
	return u.String()
}

// CutOnce arms the proxy: the next message from a client that contains pattern reaches the
// server, then that client's connection is closed.
func (p *CutProxy) CutOnce(pattern string) { p.arm(pattern, false) }

// TerminateAfterOnce arms the proxy: the server's answer to the next message from a client
// that contains pattern reaches the client, all but its ReadyForQuery, which is replaced by a
// FATAL 57P01 ErrorResponse; then that client's connection is closed.
func (p *CutProxy) TerminateAfterOnce(pattern string) { p.arm(pattern, true) }

func (p *CutProxy) arm(pattern string, terminate bool) {
	p.mu.Lock()
	p.pattern, p.terminate = []byte(pattern), terminate
	p.settled = make(chan struct{})
	p.mu.Unlock()
}

// Settled is closed once the server has answered the message the proxy cut after (so what it
// did, a COMMIT say, is done), or that connection has closed before the answer was complete.
// Call it after CutOnce or TerminateAfterOnce.
func (p *CutProxy) Settled() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}

// Cuts reports how many connections the proxy has cut.
func (p *CutProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *CutProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = true, true
		p.mu.Unlock()
		c := &cutConn{}
		go p.answer(client, server, c)
		go p.forward(client, server, c)
	}
}

// cutConn is how one proxied connection is cut, once the armed pattern has passed on it.
type cutConn struct {
	how     atomic.Int32 // cutSilently or cutTerminate; 0: not cut
	settled chan struct{}
}

// forward copies the client's bytes to the server, and marks the connection cut once the armed
// pattern has passed; the client may go on sending the rest of its message.
func (p *CutProxy) forward(client, server net.Conn, cut *cutConn) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the bytes before, so a pattern split between two reads is seen
	for {
		n, err := client.Read(buf)
		if n > 0 {
			// Marked before the bytes go on: the server's answer must not reach the client first.
			seen := append(tail, buf[:n]...)
			if how, settled := p.armedFor(seen); how != 0 {
				cut.settled = settled // published by the store below
				cut.how.Store(how)
			}
			tail = append(tail[:0], seen[max(0, len(seen)-64):]...)
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// How an armed connection is cut.
const (
	cutSilently  = 1 // the answer is dropped
	cutTerminate = 2 // the answer goes on, its ReadyForQuery replaced by a FATAL 57P01
)

// answer copies the server's bytes to the client until the connection is cut. From then on it
// reads the server's answer to the cut message (passing on its messages but the last when
// terminating, none otherwise), and once that answer is complete (PostgreSQL's ReadyForQuery:
// COMMIT done, or a pipeline run up to its Sync) it drops the client's connection and closes
// Settled. A connection that closes first (the server ended the session) closes Settled too.
func (p *CutProxy) answer(client, server net.Conn, cut *cutConn) {
	defer client.Close()
	buf := make([]byte, 64<<10)
	var held []byte // the answer's bytes not yet passed on, from a message boundary
	for {
		n, err := server.Read(buf)
		how := cut.how.Load()
		switch {
		case n > 0 && how != 0:
			held = append(held, buf[:n]...)
			done, pass := readyForQuery(held)
			if how == cutTerminate {
				_, _ = client.Write(held[:pass])
				held = held[pass:]
			}
			if done {
				if how == cutTerminate {
					_, _ = client.Write(terminatedByAdmin)
				}
				client.Close()
				close(cut.settled)
				return
			}
		case n > 0:
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if how != 0 {
				close(cut.settled)
			}
			return
		}
	}
}

// terminatedByAdmin is the ErrorResponse PostgreSQL sends before it closes a connection that
// pg_terminate_backend or a fast shutdown ended.
var terminatedByAdmin = func() []byte {
	fields := "SFATAL\x00VFATAL\x00C57P01\x00Mterminating connection due to administrator command\x00\x00"
	msg := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(fields)))
	return append(msg, fields...)
}()

// readyForQuery reports whether stream, PostgreSQL backend messages from a message boundary,
// holds a complete ReadyForQuery ('Z'), and how many bytes of whole messages come before it
// (before the first incomplete message if it holds none).
func readyForQuery(stream []byte) (found bool, before int) {
	for len(stream)-before >= 5 {
		size := int(binary.BigEndian.Uint32(stream[before+1 : before+5]))
		if len(stream)-before < 1+size {
			return false, before
		}
		if stream[before] == 'Z' {
			return true, before
		}
		before += 1 + size
	}
	return false, before
}

// armedFor reports how data's connection is to be cut (0: not at all) and the cut's Settled,
// disarming the proxy.
func (p *CutProxy) armedFor(data []byte) (how int32, settled chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pattern == nil || !bytes.Contains(bytes.ToLower(data), p.pattern) {
		return 0, nil
	}
	p.pattern = nil
	p.cuts++
	if p.terminate {
		return cutTerminate, p.settled
	}
	return cutSilently, p.settled
}

func (p *CutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}
