package voucher

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// attemptPrefix tells this process's attempts from other processes'.
var (
	attemptPrefix = func() string {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	attempts atomic.Uint64
)

// newAttempt names one try at a flash reservation, unique across processes.
func newAttempt() string {
	return attemptPrefix + strconv.FormatUint(attempts.Add(1), 36)
}
