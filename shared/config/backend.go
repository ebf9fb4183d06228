package config

import (
	"fmt"
	"time"

	"vouchergate/shared/wire"
)

// Backend is the backend process's settings.
type Backend struct {
	Addr string `env:"VG_BACKEND_ADDR" envDefault:"127.0.0.1:8080"`
	// OpsAddr is the ops listener's: /healthz, /readyz and /metrics, which lists every flash
	// voucher with its limit and uses left, so it stays off the public port. "off": none.
	OpsAddr           string        `env:"VG_BACKEND_OPS_ADDR" envDefault:"127.0.0.1:9080"`
	DatabaseURL       string        `env:"VG_DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/vouchergate?sslmode=disable"`
	RedisURL          string        `env:"VG_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	RedisClusterAddrs []string      `env:"VG_REDIS_CLUSTER_ADDRS" envSeparator:","`
	RedisPrefix       string        `env:"VG_REDIS_PREFIX" envDefault:"vg:"`
	RedisTimeout      time.Duration `env:"VG_REDIS_TIMEOUT" envDefault:"300ms"`
	NATSURL           string        `env:"VG_NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	NATSPrefix        string        `env:"VG_NATS_PREFIX" envDefault:"vouchergate"`
	NATSReplicas      int           `env:"VG_NATS_REPLICAS" envDefault:"1"` // of the sold-out bucket: 3 on a NATS cluster survives a node's death
	AdminToken        string        `env:"VG_ADMIN_TOKEN"`
	// APIKeysFile names a YAML file of the service API keys that may call the public endpoints,
	// each stored as its SHA-256 with its scopes (backend/apikeys). Empty: no key is needed.
	APIKeysFile string `env:"VG_API_KEYS_FILE"`
	// APIKeysPoll is how often the keys file is read for changes; 0 turns polling off, leaving
	// SIGHUP the only reload (and letting a test tell the two apart).
	APIKeysPoll    time.Duration `env:"VG_API_KEYS_POLL" envDefault:"1s"`
	HoldTTL        time.Duration `env:"VG_HOLD_TTL" envDefault:"15m"`
	RequestTimeout time.Duration `env:"VG_REQUEST_TIMEOUT" envDefault:"5s"`
	DBTimeout      time.Duration `env:"VG_DB_TIMEOUT" envDefault:"2s"`
	DBMaxConns     int           `env:"VG_DB_MAX_CONNS" envDefault:"32"`
	DBWarmConns    int           `env:"VG_DB_WARM_CONNS" envDefault:"8"` // dialled and prepared before the backend serves, kept open
	InFlightWait   time.Duration `env:"VG_INFLIGHT_WAIT" envDefault:"1s"`
	// MaxClockSkew is the most the backends' clocks may disagree: a retry on one backend takes
	// another's hold for stale only this much later than its own clock says.
	MaxClockSkew      time.Duration `env:"VG_MAX_CLOCK_SKEW" envDefault:"1s"`
	MaxBodyBytes      int           `env:"VG_MAX_BODY_BYTES" envDefault:"8192"`
	MaxHeaderBytes    int           `env:"VG_MAX_HEADER_BYTES" envDefault:"8192"` // the edge's limit: the backend reads HeaderLimit.Forwarded
	SoldOutEvery      time.Duration `env:"VG_SOLDOUT_EVERY" envDefault:"250ms"`
	DemoVoucher       string        `env:"VG_DEMO_VOUCHER"`
	ExpireEvery       time.Duration `env:"VG_EXPIRE_EVERY" envDefault:"30s"`
	ReconcileEvery    time.Duration `env:"VG_RECONCILE_EVERY" envDefault:"1m"`
	ReconcileGrace    time.Duration `env:"VG_RECONCILE_GRACE" envDefault:"1m"`
	DriftAlert        int64         `env:"VG_DRIFT_ALERT" envDefault:"0"`
	WarmupEvery       time.Duration `env:"VG_WARMUP_EVERY" envDefault:"30s"`
	WarmupAhead       time.Duration `env:"VG_WARMUP_AHEAD" envDefault:"10m"`
	FlashKeysKeep     time.Duration `env:"VG_FLASH_KEYS_KEEP" envDefault:"168h"` // after a flash voucher ends; 0: for good
	QuotaIdemTTL      time.Duration `env:"VG_QUOTA_IDEM_TTL" envDefault:"168h"`
	QuotaRefreshEvery time.Duration `env:"VG_QUOTA_REFRESH_EVERY" envDefault:"10s"`
	// QuotaDurability says when a quota write is answered: "async" at once (a Redis failover may
	// lose it), "replicated" once QuotaMinReplicas replicas acknowledged it, waiting at most
	// QuotaWaitTimeout (then 503: the client's retry with the same idemKey settles it).
	QuotaDurability  string        `env:"VG_QUOTA_DURABILITY" envDefault:"async"`
	QuotaMinReplicas int           `env:"VG_QUOTA_MIN_REPLICAS" envDefault:"1"`
	QuotaWaitTimeout time.Duration `env:"VG_QUOTA_WAIT_TIMEOUT" envDefault:"250ms"`
	ShutdownGrace    time.Duration `env:"VG_SHUTDOWN_GRACE" envDefault:"10s"` // how long requests in flight may finish after SIGTERM

	// Quotas as platform teams run them (config/quota.go): the eviction policy check, the
	// backoff of degrading business lines, and the numbers of POST /quotas/ops.
	QuotaEviction       string        `env:"VG_QUOTA_EVICTION" envDefault:"refuse"`
	QuotaNoRules        string        `env:"VG_QUOTA_NO_RULES" envDefault:"pass"`
	QuotaDegradeBackoff time.Duration `env:"VG_QUOTA_DEGRADE_BACKOFF" envDefault:"1s"`
	QuotaOpTypes        string        `env:"VG_QUOTA_OP_TYPES" envDefault:"1=DEDUCT,2=ROLLBACK"`
	QuotaUserInfoTypes  string        `env:"VG_QUOTA_USER_INFO_TYPES" envDefault:"1=USER,2=DEVICE,3=PHONE"`
	Log
}

// MaxNATSReplicas is the most replicas JetStream allows a stream (the sold-out bucket is one).
const MaxNATSReplicas = 5

func natsReplicasError(n int) error {
	return fmt.Errorf("VG_NATS_REPLICAS is %d; expected 1 (one NATS server) to %d, such as 3 on a three-node cluster", n, MaxNATSReplicas)
}

// QuotaReplicas is how many replicas must acknowledge a quota write before it is answered: 0
// with VG_QUOTA_DURABILITY=async.
func (c Backend) QuotaReplicas() int {
	if c.QuotaDurability != "replicated" {
		return 0
	}
	return c.QuotaMinReplicas
}

// LoadBackend reads the backend's settings and checks them.
func LoadBackend() (Backend, error) {
	var c Backend
	if err := Load(&c); err != nil {
		return c, err
	}
	return c, c.Check()
}

// minFlashKeysKeep is the least VG_FLASH_KEYS_KEEP, less the longest hold: reconciliation reads
// a flash voucher in Redis for a day after it ends (voucher.ReconcileAll).
const minFlashKeysKeep = 25 * time.Hour

// longestHold is how long a hold taken just before its voucher ends may outlive it: VG_HOLD_TTL,
// or the voucher's own holdTtl, which may be up to wire.MaxHoldTTL.
func (c Backend) longestHold() time.Duration { return max(c.HoldTTL, wire.MaxHoldTTL) }

// Check reports the first setting that cannot work, naming its variable.
func (c Backend) Check() error {
	if err := c.Log.Check(); err != nil {
		return err
	}
	switch {
	case c.HoldTTL <= 0:
		return fmt.Errorf("VG_HOLD_TTL is %v; expected a positive duration such as 15m", c.HoldTTL)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("VG_REQUEST_TIMEOUT is %v; expected a positive duration such as 5s", c.RequestTimeout)
	case c.DBTimeout <= 0:
		return fmt.Errorf("VG_DB_TIMEOUT is %v; expected a positive duration such as 2s", c.DBTimeout)
	case c.RedisTimeout <= 0:
		return fmt.Errorf("VG_REDIS_TIMEOUT is %v; expected a positive duration such as 300ms", c.RedisTimeout)
	case c.NATSReplicas < 1 || c.NATSReplicas > MaxNATSReplicas:
		return natsReplicasError(c.NATSReplicas)
	case c.DBMaxConns < 1:
		return fmt.Errorf("VG_DB_MAX_CONNS is %d; expected at least 1", c.DBMaxConns)
	case c.DBWarmConns < 0:
		return fmt.Errorf("VG_DB_WARM_CONNS is %d; expected 0 (none) or more (at most VG_DB_MAX_CONNS are warmed)", c.DBWarmConns)
	case c.MaxClockSkew < 0:
		return fmt.Errorf("VG_MAX_CLOCK_SKEW is %v; expected 0 or a positive duration such as 1s", c.MaxClockSkew)
	case c.ReconcileGrace <= 2*c.DBTimeout+c.MaxClockSkew:
		return fmt.Errorf("VG_RECONCILE_GRACE is %v; expected more than twice VG_DB_TIMEOUT (%v) plus VG_MAX_CLOCK_SKEW (%v), or a write still in flight is taken for hanging",
			c.ReconcileGrace, c.DBTimeout, c.MaxClockSkew)
	case c.QuotaIdemTTL < time.Second:
		return fmt.Errorf("VG_QUOTA_IDEM_TTL is %v; expected at least 1s, such as 168h", c.QuotaIdemTTL)
	case c.ShutdownGrace <= 0:
		return fmt.Errorf("VG_SHUTDOWN_GRACE is %v; expected a positive duration such as 10s", c.ShutdownGrace)
	case c.APIKeysPoll < 0:
		return fmt.Errorf("VG_API_KEYS_POLL is %v; expected 0 (off: reload on SIGHUP only) or a positive duration such as 1s", c.APIKeysPoll)
	case c.FlashKeysKeep != 0 && c.FlashKeysKeep < minFlashKeysKeep+c.longestHold():
		return fmt.Errorf("VG_FLASH_KEYS_KEEP is %v; expected 0 (keep for good) or at least %v (%v plus the longest hold: VG_HOLD_TTL, %v, or a voucher's holdTtl, up to %v), such as 168h: reconciliation keeps a voucher a day after its end",
			c.FlashKeysKeep, minFlashKeysKeep+c.longestHold(), minFlashKeysKeep, c.HoldTTL, wire.MaxHoldTTL)
	case c.QuotaDurability != "" && c.QuotaDurability != "async" && c.QuotaDurability != "replicated": // "": filled by hand, async
		return fmt.Errorf("VG_QUOTA_DURABILITY is %q; expected async (answer at once) or replicated (answer once VG_QUOTA_MIN_REPLICAS replicas have the write)", c.QuotaDurability)
	case c.QuotaDurability == "replicated" && c.QuotaMinReplicas < 1:
		return fmt.Errorf("VG_QUOTA_MIN_REPLICAS is %d; expected at least 1 with VG_QUOTA_DURABILITY=replicated", c.QuotaMinReplicas)
	case c.QuotaDurability == "replicated" && (c.QuotaWaitTimeout < time.Millisecond || c.QuotaWaitTimeout >= c.RedisTimeout):
		return fmt.Errorf("VG_QUOTA_WAIT_TIMEOUT is %v; expected at least 1ms and less than VG_REDIS_TIMEOUT (%v), such as 250ms", c.QuotaWaitTimeout, c.RedisTimeout)
	case c.QuotaRefreshEvery <= 0:
		return fmt.Errorf("VG_QUOTA_REFRESH_EVERY is %v; expected a positive duration such as 10s", c.QuotaRefreshEvery)
	case c.MaxHeaderBytes < minHeaderBytes:
		return fmt.Errorf("%s is %d; expected at least %d", HeaderLimitVar, c.MaxHeaderBytes, minHeaderBytes)
	case c.MaxBodyBytes < 256:
		return fmt.Errorf("VG_MAX_BODY_BYTES is %d; expected at least 256", c.MaxBodyBytes)
	case c.HasOps() && !validHostPort(c.OpsAddr):
		return fmt.Errorf("VG_BACKEND_OPS_ADDR is %q; expected host:port such as 127.0.0.1:9080, or %q (no ops listener: no /metrics)", c.OpsAddr, OpsOff)
	}
	return c.checkQuotas()
}

// HasOps reports whether the backend runs an ops listener.
func (c Backend) HasOps() bool { return c.OpsAddr != "" && c.OpsAddr != OpsOff }

// DBWarm is how many PostgreSQL connections are warmed before the backend serves:
// VG_DB_WARM_CONNS, at most VG_DB_MAX_CONNS.
func (c Backend) DBWarm() int { return min(c.DBWarmConns, c.DBMaxConns) }
