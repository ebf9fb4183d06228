//go:build !linux

package upstream

import "net"

// Without Linux's socket state, an idle connection is taken as usable (a request lost on it is
// retried only when idempotent) and a client's departure is seen when writing to it.

func idleUsable(net.Conn) bool { return true }

// PeerGone reports false: it cannot tell here.
func PeerGone(net.Conn) bool { return false }
