package config

import (
	"strings"
	"testing"
)

// The quota platform settings: their defaults map POST /quotas/ops as the quota design numbers
// it, and a setting that cannot work is refused naming its variable and the form it expects.
func TestQuotaPlatformSettings(t *testing.T) {
	cleanEnv(t)
	c, err := LoadBackend()
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.QuotaOpMapping()
	if err != nil || m.OpTypes[1] != "DEDUCT" || m.OpTypes[2] != "ROLLBACK" || m.UserInfoTypes[1] != "USER" ||
		m.UserInfoTypes[2] != "DEVICE" || m.UserInfoTypes[3] != "PHONE" || c.AllowQuotaEviction() {
		t.Fatalf("defaults: %+v %v, eviction allowed %v", m, err, c.AllowQuotaEviction())
	}
	t.Setenv("VG_QUOTA_USER_INFO_TYPES", "1=USER,4=ID_CARD")
	t.Setenv("VG_QUOTA_OP_TYPES", "10=ROLLBACK,20=DEDUCT")
	t.Setenv("VG_QUOTA_EVICTION", "allow")
	if c, err = LoadBackend(); err != nil {
		t.Fatal(err)
	}
	if m, err := c.QuotaOpMapping(); err != nil || m.UserInfoTypes[4] != "ID_CARD" || m.OpTypes[20] != "DEDUCT" || !c.AllowQuotaEviction() {
		t.Fatalf("set: %+v %v", m, err)
	}

	for _, tt := range []struct{ name, value, want string }{
		{"VG_QUOTA_OP_TYPES", "1=DEDUCT", "DEDUCT and ROLLBACK once each"},
		{"VG_QUOTA_OP_TYPES", "1=DEDUCT,2=DEDUCT", "DEDUCT is named twice"},
		{"VG_QUOTA_OP_TYPES", "1=DEDUCT,1=ROLLBACK", "1 is mapped twice"},
		{"VG_QUOTA_OP_TYPES", "1=BUY,2=ROLLBACK", "NUMBER=NAME"},
		{"VG_QUOTA_USER_INFO_TYPES", "1=user", "NUMBER=NAME"},
		{"VG_QUOTA_USER_INFO_TYPES", "x=USER", "NUMBER=NAME"},
		{"VG_QUOTA_USER_INFO_TYPES", "-1=USER", "NUMBER=NAME"},
		{"VG_QUOTA_EVICTION", "maybe", "refuse"},
		{"VG_QUOTA_DEGRADE_BACKOFF", "-1s", "positive duration"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv(tt.name, tt.value)
			_, err := LoadBackend()
			if err == nil || !strings.Contains(err.Error(), tt.name) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%s=%s: %v; want it named with %q", tt.name, tt.value, err, tt.want)
			}
		})
	}
}
