package testkit

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// CutProxy forwards TCP connections on 127.0.0.1 to a server and, once armed, cuts the
// connection that sends a given byte pattern when the server answers it, so the answer never
// comes back. Pointed at PostgreSQL and armed with "commit", it leaves a client
// not knowing whether its transaction committed (the server did commit it).
type CutProxy struct {
	Addr   string // host:port to dial instead of the server
	target string
	ln     net.Listener

	mu      sync.Mutex
	pattern []byte // nil: forward everything
	cuts    int
	conns   map[net.Conn]bool
	settled chan struct{} // closed once the server has answered the cut message
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

// CutOnce arms the proxy: the next message from a client that contains pattern reaches the
// server, then that client's connection is closed.
func (p *CutProxy) CutOnce(pattern string) {
	p.mu.Lock()
	p.pattern = []byte(pattern)
	p.settled = make(chan struct{})
	p.mu.Unlock()
}

// Settled is closed once the server has answered the message the proxy cut after (so what it
// did, a COMMIT say, is done), or has closed that connection. Call it after CutOnce.
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
		var cut atomic.Bool
		go p.answer(client, server, &cut)
		go p.forward(client, server, &cut)
	}
}

// forward copies the client's bytes to the server, and marks the connection cut once the armed
// pattern has passed; the client may go on sending the rest of its message.
func (p *CutProxy) forward(client, server net.Conn, cut *atomic.Bool) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
			if p.armedFor(buf[:n]) {
				cut.Store(true)
			}
		}
		if err != nil {
			return
		}
	}
}

// answer copies the server's bytes to the client until the connection is cut: the server's first
// answer after that, sent once it has run what it was sent (a COMMIT, or a pipeline up to its
// Sync), is dropped with the client's connection, and Settled is closed.
func (p *CutProxy) answer(client, server net.Conn, cut *atomic.Bool) {
	defer client.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && cut.Load() {
			client.Close()
			p.mu.Lock()
			close(p.settled)
			p.mu.Unlock()
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *CutProxy) armedFor(data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pattern == nil || !bytes.Contains(bytes.ToLower(data), p.pattern) {
		return false
	}
	p.pattern = nil
	p.cuts++
	return true
}

func (p *CutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}
