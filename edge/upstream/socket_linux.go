package upstream

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Two questions about a connection's far end, asked of the kernel without reading a byte:
// whether an idle upstream connection may still carry a request (idleUsable), and whether a
// client waiting for its answer has gone away (PeerGone).

// idleUsable reports whether an idle kept-alive connection may carry a request: nothing is
// waiting on it, neither the server's FIN nor bytes it sent unasked (a 408 before closing).
// Either means the server is done with it, and a request written there would be lost.
func idleUsable(c net.Conn) bool {
	raw, ok := rawConn(c)
	if !ok {
		return true // not a socket (a test's pipe): nothing to ask
	}
	usable := true
	err := raw.Control(func(fd uintptr) {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		usable = errors.Is(err, unix.EAGAIN) // a byte, an EOF or an error: not usable
	})
	return err == nil && usable
}

// PeerGone reports whether the far end of c has closed or reset it: its FIN or RST arrived
// (TCP state CLOSE_WAIT or CLOSE). Bytes it sent and the edge has not read yet (a pipelined
// request, a TLS close alert) do not hide the FIN behind them, as a read would.
func PeerGone(c net.Conn) bool {
	raw, ok := rawConn(c)
	if !ok {
		return false
	}
	gone := false
	err := raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		gone = err == nil && (info.State == unix.BPF_TCP_CLOSE_WAIT || info.State == unix.BPF_TCP_CLOSE)
	})
	return err == nil && gone
}

// rawConn is the socket under c: through TLS, and through wrappers that expose it as NetConn.
func rawConn(c net.Conn) (syscall.RawConn, bool) {
	for range 4 {
		switch t := c.(type) {
		case *tls.Conn:
			c = t.NetConn()
			continue
		case syscall.Conn:
			raw, err := t.SyscallConn()
			return raw, err == nil
		case interface{ NetConn() net.Conn }:
			c = t.NetConn()
			continue
		}
		return nil, false
	}
	return nil, false
}
