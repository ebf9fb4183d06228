package proxy

import (
	"crypto/tls"
	"net"
)

// ClientListener wraps ln, the edge's public listener, for its server (NewServer): a
// connection over caps is answered (429 from one address, 503 in all) and closed before its
// request is read, near the cap in all the connection idle longest is closed to make room, and each request's header is refused at a bare LF. Under it, ln may be a
// tls.NewListener: the headers looked at are the decrypted ones, and the server still sees a
// TLS connection (ctx.IsTLS, X-Forwarded-Proto: https).
func ClientListener(ln net.Listener, caps Caps) net.Listener {
	return clientListener{Listener: ln, conns: newConns(caps)}
}

type clientListener struct {
	net.Listener
	conns *conns
}

func (l clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, hasIP := clientIP(c)
		status, idle := l.conns.admit(ip, hasIP)
		l.conns.closeIdle(idle)
		if status != 0 {
			refuse(c, status)
			continue
		}
		h := newHeadConn(c, l.conns, ip, hasIP)
		if t, ok := c.(*tls.Conn); ok {
			return &tlsHeadConn{headConn: h, tls: t}, nil
		}
		return h, nil
	}
}

// tlsHeadConn is a headConn over TLS: it shows fasthttp the TLS connection's state.
type tlsHeadConn struct {
	*headConn
	tls *tls.Conn
}

func (c *tlsHeadConn) Handshake() error                     { return c.tls.Handshake() }
func (c *tlsHeadConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }
