package config

// HeaderLimitVar names the one setting for request headers that both processes read: the edge
// refuses a client's header larger than it (431), and the backend reads any header the edge
// forwards (HeaderLimit.Forwarded), so no request the edge passes on gets the backend's 400.
const HeaderLimitVar = "VG_MAX_HEADER_BYTES"

const minHeaderBytes = 1024

// forwardedHeaderRoom is what the edge may add to a client's header, and more: X-Forwarded-For's
// last address, X-Real-Ip, X-Forwarded-Proto, X-Forwarded-Host (a Host the edge checked: at most
// 255 bytes) and X-Request-Id (at most 128 bytes).
const forwardedHeaderRoom = 1024

// HeaderLimit is the size of a request's header, request line included, in bytes (fasthttp's
// read buffer).
type HeaderLimit int

// Forwarded is the largest header the edge writes upstream, and so the backend's read buffer.
// The edge checks each header it forwards against it: a client's header that grows past it on
// the way (its lines written again in canonical form) gets the edge's 431, never the backend's
// 400.
func (l HeaderLimit) Forwarded() int { return int(l) + forwardedHeaderRoom }
