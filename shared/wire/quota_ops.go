package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// QuotaOpCmd is the body of POST /quotas/ops: the QuotaOpCmd of the quota design the shops'
// Java clients were written against, as Jackson serialises it (ints as JSON numbers, a list
// left unset as null). opType names the operation and userInfoType the identity type, each by
// the numbers QuotaOpMapping gives. RollbackKey is this API's own, optional: a partial rollback
// sent without one is named by its items.
type QuotaOpCmd struct {
	BizID       int64         `json:"bizId"`
	OpType      int64         `json:"opType"`
	IdemKey     string        `json:"idemKey"`
	OpItems     []QuotaOpItem `json:"opItems"`
	RollbackKey string        `json:"rollbackKey,omitempty"`
}

// QuotaOpItem is one item of a QuotaOpCmd: an identity (userInfoType, userInfoId), the item's
// dimensions as the design writes them ("T_GAME": dimension TYPE... see QuotaOpDimension), a
// TTL in seconds the design's clients compute (expireTime: the rules' windows decide instead)
// and the amount (opNum).
type QuotaOpItem struct {
	UserInfoType int64    `json:"userInfoType"`
	UserInfoID   string   `json:"userInfoId"`
	Dimensions   []string `json:"dimensions"`
	ExpireTime   int64    `json:"expireTime"`
	OpNum        int64    `json:"opNum"`
}

// The operations an opType names.
const (
	OpDeduct   = "DEDUCT"
	OpRollback = "ROLLBACK"
)

// MaxInt32 bounds the fields a Java client sends as an int.
const MaxInt32 = 1<<31 - 1

// QuotaOpMapping maps a QuotaOpCmd's numbers to this API's names: opType to DEDUCT or ROLLBACK,
// userInfoType to an identity type.
type QuotaOpMapping struct {
	OpTypes       map[int64]string
	UserInfoTypes map[int64]string
}

// DefaultQuotaOpTypes and DefaultQuotaUserInfoTypes are the mapping's defaults, as the design
// numbers them.
const (
	DefaultQuotaOpTypes       = "1=DEDUCT,2=ROLLBACK"
	DefaultQuotaUserInfoTypes = "1=USER,2=DEVICE,3=PHONE"
)

// ParseQuotaOpMapping reads the two settings, "N=NAME" comma-separated each: opTypes names
// DEDUCT and ROLLBACK once each; userInfoTypes names identity types (^[A-Z0-9_]{1,32}$), each
// number once.
func ParseQuotaOpMapping(opTypes, userInfoTypes string) (QuotaOpMapping, error) {
	ops, err := parseNumbered("VG_QUOTA_OP_TYPES", opTypes, "1=DEDUCT,2=ROLLBACK", func(name string) bool {
		return name == OpDeduct || name == OpRollback
	})
	if err != nil {
		return QuotaOpMapping{}, err
	}
	seen := map[string]bool{}
	for _, name := range ops {
		if seen[name] {
			return QuotaOpMapping{}, fmt.Errorf("VG_QUOTA_OP_TYPES is %q: %s is named twice; expected DEDUCT and ROLLBACK once each, such as 1=DEDUCT,2=ROLLBACK", opTypes, name)
		}
		seen[name] = true
	}
	if !seen[OpDeduct] || !seen[OpRollback] {
		return QuotaOpMapping{}, fmt.Errorf("VG_QUOTA_OP_TYPES is %q; expected DEDUCT and ROLLBACK once each, such as 1=DEDUCT,2=ROLLBACK", opTypes)
	}
	users, err := parseNumbered("VG_QUOTA_USER_INFO_TYPES", userInfoTypes, "1=USER,2=DEVICE,3=PHONE", validIdentityType)
	if err != nil {
		return QuotaOpMapping{}, err
	}
	return QuotaOpMapping{OpTypes: ops, UserInfoTypes: users}, nil
}

// DefaultQuotaOpMapping is the mapping of the defaults.
func DefaultQuotaOpMapping() QuotaOpMapping {
	m, err := ParseQuotaOpMapping(DefaultQuotaOpTypes, DefaultQuotaUserInfoTypes)
	if err != nil {
		panic(err)
	}
	return m
}

func parseNumbered(variable, s, example string, valid func(string) bool) (map[int64]string, error) {
	out := map[int64]string{}
	for part := range strings.SplitSeq(s, ",") {
		num, name, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(num, 10, 64)
		switch {
		case !ok || err != nil || n < 0 || n > MaxInt32 || !valid(name):
			return nil, fmt.Errorf("%s is %q: %q is not NUMBER=NAME; expected such as %s", variable, s, part, example)
		case out[n] != "":
			return nil, fmt.Errorf("%s is %q: %d is mapped twice; expected each number once, such as %s", variable, s, n, example)
		}
		out[n] = name
	}
	return out, nil
}

func validIdentityType(s string) bool {
	if s == "" || len(s) > MaxIdentityTypeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// QuotaOpDimension turns a dimension as the design's clients write it, TYPE_VALUE ("T_GAME",
// "P_ITEM_1001": split at the first '_'), into this API's NAME:VALUE ("T:GAME",
// "P:ITEM_1001"). One already in NAME:VALUE form is taken as it is. ok is false for one with
// neither separator.
func QuotaOpDimension(d string) (string, bool) {
	if strings.Contains(d, ":") {
		return d, true
	}
	name, value, ok := strings.Cut(d, "_")
	if !ok || name == "" || value == "" {
		return "", false
	}
	return name + ":" + value, true
}
