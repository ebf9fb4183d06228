package testkit

import (
	"crypto/sha1"
	"encoding/base64"
	"io"
)

// The least of RFC 6455 a test needs to speak WebSocket through the edge: the handshake's
// accept value and small text frames.

// WebSocketAccept is the Sec-WebSocket-Accept for key (RFC 6455 §4.2.2).
func WebSocketAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// ReadWebSocketFrame reads one frame of up to 125 bytes and returns its payload, unmasked.
func ReadWebSocketFrame(r io.Reader) ([]byte, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int(head[1] & 0x7f)
	var mask [4]byte
	if head[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return nil, err
		}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, err
	}
	for i := range payload {
		payload[i] ^= mask[i%4]
	}
	return payload, nil
}

// WebSocketTextFrame is a final text frame of payload (up to 125 bytes), masked with mask if
// given (a client's frames are, a server's are not).
func WebSocketTextFrame(payload []byte, mask []byte) []byte {
	f := []byte{0x81, byte(len(payload))}
	if mask == nil {
		return append(f, payload...)
	}
	f[1] |= 0x80
	f = append(f, mask...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	return f
}
