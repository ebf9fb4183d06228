package quota

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// An identity's record of an idemKey keeps the counters its step changed, in a line each:
//
//	kind \t amount \t limit \t ms \t seg \t windowID \t dimension [\t shadowRule:shadowLimit] \n
//
// where ms is a 'C' counter's period end or an 'R' counter's window size, limit is -1 when no
// ENFORCE rule implies the counter, and the last field, absent in records written before
// SHADOW rules, names the lowest SHADOW rule implying it. Dimensions and window IDs hold no tab
// or newline (no control characters are allowed). The record lets a retry answer as the first
// attempt did and a rollback give back exactly what was taken.

func appendRecord(b []byte, cs []counterPlan) []byte {
	for i := range cs {
		c := &cs[i]
		b = append(b, c.kind, '\t')
		b = strconv.AppendInt(b, c.amount, 10)
		b = append(b, '\t')
		if c.enforced {
			b = strconv.AppendInt(b, c.limit, 10)
		} else {
			b = append(b, "-1"...)
		}
		b = append(b, '\t')
		if c.kind == 'C' {
			b = strconv.AppendInt(b, c.resetsAt, 10)
		} else {
			b = strconv.AppendInt(b, c.span, 10)
		}
		b = append(b, '\t')
		b = append(b, c.seg...)
		b = append(b, '\t')
		b = append(b, c.window.id...)
		b = append(b, '\t')
		b = append(b, c.dimension...)
		if c.hasShadow {
			b = append(b, '\t')
			b = strconv.AppendInt(b, c.shadowRule, 10)
			b = append(b, ':')
			b = strconv.AppendInt(b, c.shadowLimit, 10)
		}
		b = append(b, '\n')
	}
	return b
}

// recorded is one counter read back from a record.
type recorded struct {
	kind     byte
	amount   int64
	limit    int64 // -1: no ENFORCE rule
	ms       int64
	seg      string
	windowID string
	dim      string
	// the lowest SHADOW rule, when shadowRule is not 0
	shadowRule  int64
	shadowLimit int64
}

var errBadRecord = errors.New("quota record is malformed")

func parseRecord(s string) ([]recorded, error) {
	var out []recorded
	for s != "" {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok {
			return nil, errBadRecord
		}
		s = rest
		var fields [7]string
		for i := 0; i < 6; i++ {
			var found bool
			fields[i], line, found = strings.Cut(line, "\t")
			if !found {
				return nil, errBadRecord
			}
		}
		dim, shadow, hasShadow := strings.Cut(line, "\t")
		fields[6] = dim
		kind := fields[0]
		if len(kind) != 1 || (kind[0] != 'C' && kind[0] != 'R') {
			return nil, errBadRecord
		}
		r := recorded{kind: kind[0], seg: fields[4], windowID: fields[5], dim: fields[6]}
		if hasShadow {
			id, limit, ok := strings.Cut(shadow, ":")
			var err1, err2 error
			r.shadowRule, err1 = strconv.ParseInt(id, 10, 64)
			r.shadowLimit, err2 = strconv.ParseInt(limit, 10, 64)
			if !ok || err1 != nil || err2 != nil || r.shadowRule <= 0 {
				return nil, errBadRecord
			}
		}
		var err1, err2, err3 error
		r.amount, err1 = strconv.ParseInt(fields[1], 10, 64)
		r.limit, err2 = strconv.ParseInt(fields[2], 10, 64)
		r.ms, err3 = strconv.ParseInt(fields[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, errBadRecord
		}
		out = append(out, r)
	}
	return out, nil
}

// used is one counter's state as a script reported it.
type used struct {
	used   int64
	oldest int64 // ms of the oldest rolling entry; 0 if none or not rolling
}

// parseUsed reads a script's "used:oldestMs" list, space separated, of n counters.
func parseUsed(s string, n int) ([]used, error) {
	out := make([]used, 0, n)
	for s != "" {
		var tok string
		tok, s, _ = strings.Cut(s, " ")
		usedText, oldestText, ok := strings.Cut(tok, ":")
		if !ok {
			return nil, errBadRecord
		}
		n, err1 := strconv.ParseInt(usedText, 10, 64)
		oldest, err2 := parseScore(oldestText)
		if err1 != nil || err2 != nil {
			return nil, errBadRecord
		}
		out = append(out, used{used: n, oldest: oldest})
	}
	if len(out) != n {
		return nil, errBadRecord
	}
	return out, nil
}

// parseScore reads a sorted-set score, which Redis may print as a float.
func parseScore(s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	return int64(f), err
}

// resetsAt is a counter's ResetsAt given its kind, ms field and state.
func resetsAt(kind byte, ms int64, u used, loc *time.Location) time.Time {
	if kind == 'C' {
		return time.UnixMilli(ms).In(loc)
	}
	if u.used == 0 || u.oldest == 0 {
		return time.Time{}
	}
	return time.UnixMilli(u.oldest + ms).UTC()
}
