package quota_test

import (
	"testing"
	"time"

	"vouchergate/backend/quota"
)

// Every key a deduct writes expires: a counter when its period ends (plus a grace for late
// rollbacks), a rolling counter a window after its newest purchase, records after IdemTTL.
func TestKeysExpire(t *testing.T) {
	const tz = "Asia/Shanghai"
	now := mustTime(t, time.DateTime, "2025-03-05 18:00:00", tz) // six hours before midnight
	e := newEnv(t, now)
	e.rule(t, 1, "USER", "ITEM:1", 5, calendar(t, quota.Day, tz))
	e.rule(t, 1, "USER", "ITEM:1", 5, rolling(t, time.Hour))
	for _, key := range []string{"a", "b"} {
		if _, err := e.deduct(1, key, item("USER", "u", 1, "ITEM:1")); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Hour) // the second deduct must not move the day counter's end
	}
	base := e.cfg.KeyPrefix + "quota:{1:USER:u}:"
	grace := 10 * time.Minute
	for _, c := range []struct {
		key      string
		min, max time.Duration
	}{
		{base + "c:DAY/Asia/Shanghai/20250305:ITEM:1", 6*time.Hour + grace - time.Minute, 6*time.Hour + grace},
		{base + "z:ROLLING/3600000:ITEM:1", time.Hour - time.Minute, time.Hour},
		{base + "s:ROLLING/3600000:ITEM:1", time.Hour - time.Minute, time.Hour},
		{base + "i:a", 10*time.Minute - time.Minute, 10 * time.Minute},
		{e.cfg.KeyPrefix + "quota:req:{1:b}", 10*time.Minute - time.Minute, 10 * time.Minute},
	} {
		ttl, err := e.rdb.PTTL(t.Context(), c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < c.min || ttl > c.max {
			t.Errorf("%s expires in %v; want %v to %v", c.key, ttl, c.min, c.max)
		}
	}
}
