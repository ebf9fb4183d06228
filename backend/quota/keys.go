package quota

import "strconv"

// Key names. Every key of one identity shares the hash tag {bizId:identityType:identity}, so
// one script call touches them all on Redis Cluster; the prefix holds no brace (checked by
// keys.CheckPrefix), so that tag is the key's first {...}. Identities, dimensions and idemKeys
// hold no brace either. The window part holds no ':', so a dimension may.
//
//	<prefix>quota:{1:USER:12345}:c:DAY/Asia/Shanghai/20250309:ITEM:1001  calendar or fixed counter
//	<prefix>quota:{1:USER:12345}:z:ROLLING/86400000:ITEM:1001            rolling entries (sorted set)
//	<prefix>quota:{1:USER:12345}:s:ROLLING/86400000:ITEM:1001            rolling sum
//	<prefix>quota:{1:USER:12345}:i:order-77                              the identity's record of an idemKey
//	<prefix>quota:{1:USER:12345}:x                                       index of its wildcard rules' counters
//	<prefix>quota:{1:USER:12345}:r                                       when each counter was last reset
//	<prefix>quota:req:{1:order-77}                                       the identities an idemKey touched
//	<prefix>quota:req:{1:order-77}:p                                     its partial rollbacks' rollbackKeys

func identityBase(prefix string, bizID int64, typ, identity string) string {
	b := make([]byte, 0, len(prefix)+len("quota:{::}:")+20+len(typ)+len(identity))
	b = append(b, prefix...)
	b = append(b, "quota:{"...)
	b = strconv.AppendInt(b, bizID, 10)
	b = append(b, ':')
	b = append(b, typ...)
	b = append(b, ':')
	b = append(b, identity...)
	b = append(b, "}:"...)
	return string(b)
}

func recordKey(base, idemKey string) string { return base + "i:" + idemKey }

// indexKey names the identity's index of counters that only items name (quota_deduct.lua).
func indexKey(base string) string { return base + "x" }

// resetsKey names the identity's hash of counter key → when it was last reset (quota_reset.lua).
func resetsKey(base string) string { return base + "r" }

func requestKey(prefix string, bizID int64, idemKey string) string {
	b := make([]byte, 0, len(prefix)+len("quota:req:{:}")+20+len(idemKey))
	b = append(b, prefix...)
	b = append(b, "quota:req:{"...)
	b = strconv.AppendInt(b, bizID, 10)
	b = append(b, ':')
	b = append(b, idemKey...)
	b = append(b, '}')
	return string(b)
}

// rollbackKeysKey names the hash of a request's rollbackKeys (quota_rollback_key.lua).
func rollbackKeysKey(reqKey string) string { return reqKey + ":p" }

// appendCounterKeys appends the one key of a 'C' counter or the two of an 'R' counter.
func appendCounterKeys(keys []string, base string, kind byte, seg, dim string) []string {
	if kind == 'C' {
		return append(keys, base+"c:"+seg+":"+dim)
	}
	return append(keys, base+"z:"+seg+":"+dim, base+"s:"+seg+":"+dim)
}

// identityTag is how the request record names an identity: "TYPE:identity".
func identityTag(typ, identity string) string { return typ + ":" + identity }
