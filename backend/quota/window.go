package quota

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database
)

// WindowType is the kind of period a rule counts over.
type WindowType string

// Window types.
const (
	Day     WindowType = "DAY"     // calendar day in the rule's time zone
	Week    WindowType = "WEEK"    // ISO week, Monday first, in the rule's time zone
	Month   WindowType = "MONTH"   // calendar month in the rule's time zone
	Rolling WindowType = "ROLLING" // the last Size: a purchase counts for exactly Size
	Fixed   WindowType = "FIXED"   // [Start, End); outside it the rule does not apply
)

// Window is the period a rule counts over. Build one with NewCalendarWindow,
// NewRollingWindow or NewFixedWindow; the zero Window is not valid.
type Window struct {
	Type     WindowType
	Timezone string        // DAY, WEEK, MONTH: an IANA name such as "Asia/Shanghai"
	Size     time.Duration // ROLLING: whole milliseconds
	Start    time.Time     // FIXED
	End      time.Time     // FIXED

	loc    *time.Location
	id     string
	period *atomic.Pointer[period] // the last period used, shared by copies of the window
}

// period is a calendar or fixed window's period as key names and deducts use it.
type period struct {
	start, end time.Time
	endMs      int64
	seg        string // the window and period part of counter key names
}

// Bounds on windows.
const (
	maxTimezoneLen = 64
	maxRollingSize = 366 * 24 * time.Hour
)

var locations sync.Map // name -> *time.Location; LoadLocation reads tzdata every call

func loadLocation(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, l)
	return l, nil
}

// NewCalendarWindow returns a DAY, WEEK or MONTH window in time zone tz.
func NewCalendarWindow(t WindowType, tz string) (Window, error) {
	if t != Day && t != Week && t != Month {
		return Window{}, invalid("window.type %q is not DAY, WEEK or MONTH", t)
	}
	if tz == "" {
		return Window{}, invalid("window.timezone is required for a %s window, e.g. \"Asia/Shanghai\" or \"UTC\"", t)
	}
	// ':' and braces would make key names ambiguous; no IANA name has them.
	if len(tz) > maxTimezoneLen || strings.ContainsAny(tz, ":{} ") || tz == "Local" {
		return Window{}, invalid("window.timezone %q is not an IANA time zone name", tz)
	}
	loc, err := loadLocation(tz)
	if err != nil {
		return Window{}, invalid("window.timezone %q is not an IANA time zone name", tz)
	}
	return Window{Type: t, Timezone: tz, loc: loc, id: string(t) + "/" + tz, period: new(atomic.Pointer[period])}, nil
}

// NewRollingWindow returns a ROLLING window of size, a whole number of milliseconds from 1s to
// 366 days.
func NewRollingWindow(size time.Duration) (Window, error) {
	if size < time.Second || size > maxRollingSize || size%time.Millisecond != 0 {
		return Window{}, invalid("window.size %v must be whole milliseconds from 1s to 8784h (366 days)", size)
	}
	return Window{Type: Rolling, Size: size, id: "ROLLING/" + strconv.FormatInt(size.Milliseconds(), 10)}, nil
}

// NewFixedWindow returns a FIXED window counting from start until end, to the millisecond.
func NewFixedWindow(start, end time.Time) (Window, error) {
	start, end = start.Truncate(time.Millisecond), end.Truncate(time.Millisecond)
	if !end.After(start) {
		return Window{}, invalid("window.end %s must be after window.start %s",
			end.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
	w := Window{Type: Fixed, Start: start, End: end,
		id: "FIXED/" + strconv.FormatInt(start.UnixMilli(), 10) + "/" + strconv.FormatInt(end.UnixMilli(), 10)}
	w.period = new(atomic.Pointer[period])
	w.period.Store(&period{start: start, end: end, endMs: end.UnixMilli(), seg: w.id})
	return w, nil
}

// ParseWindowID returns the window whose ID is id.
func ParseWindowID(id string) (Window, error) {
	typ, rest, _ := strings.Cut(id, "/")
	switch WindowType(typ) {
	case Day, Week, Month:
		return NewCalendarWindow(WindowType(typ), rest)
	case Rolling:
		ms, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || ms > int64(maxRollingSize/time.Millisecond) {
			return Window{}, invalid("window id %q: bad size", id)
		}
		return NewRollingWindow(time.Duration(ms) * time.Millisecond)
	case Fixed:
		startMs, endMs, _ := strings.Cut(rest, "/")
		start, err1 := strconv.ParseInt(startMs, 10, 64)
		end, err2 := strconv.ParseInt(endMs, 10, 64)
		if err1 != nil || err2 != nil {
			return Window{}, invalid("window id %q: bad period", id)
		}
		return NewFixedWindow(time.UnixMilli(start).UTC(), time.UnixMilli(end).UTC())
	}
	return Window{}, invalid("window id %q: unknown type", id)
}

// ID is the window in one canonical string: "DAY/Asia/Shanghai", "ROLLING/86400000",
// "FIXED/<startMs>/<endMs>". Two rules with the same dimension and ID share their counters.
func (w Window) ID() string { return w.id }

// Location is the time zone of a calendar window (UTC for the others).
func (w Window) Location() *time.Location {
	if w.loc == nil {
		return time.UTC
	}
	return w.loc
}

// Period is the stretch of a calendar or fixed window that contains an instant.
type Period struct {
	Start, End time.Time // [Start, End)
	Label      string    // names the period in key names: "20250309", "2025W10", "202503"
}

// PeriodAt returns the period of a DAY, WEEK, MONTH or FIXED window containing now, and false
// for a FIXED window that does not contain now (the rule does not apply then) or a ROLLING one.
// Calendar periods begin at local midnight, so a day across a daylight-saving change lasts 23
// or 25 hours.
func (w Window) PeriodAt(now time.Time) (Period, bool) {
	switch w.Type {
	case Fixed:
		if now.Before(w.Start) || !now.Before(w.End) {
			return Period{}, false
		}
		return Period{Start: w.Start, End: w.End, Label: "all"}, true
	case Day, Week, Month:
	default:
		return Period{}, false
	}
	local := now.In(w.loc)
	y, m, d := local.Date()
	var p Period
	switch w.Type {
	case Day:
		p.Start = time.Date(y, m, d, 0, 0, 0, 0, w.loc)
		p.End = time.Date(y, m, d+1, 0, 0, 0, 0, w.loc)
		p.Label = periodLabel(y, "", int(m), d)
	case Week:
		back := (int(local.Weekday()) + 6) % 7 // days since Monday
		p.Start = time.Date(y, m, d-back, 0, 0, 0, 0, w.loc)
		p.End = time.Date(y, m, d-back+7, 0, 0, 0, 0, w.loc)
		isoYear, isoWeek := local.ISOWeek()
		p.Label = periodLabel(isoYear, "W", isoWeek, -1)
	case Month:
		p.Start = time.Date(y, m, 1, 0, 0, 0, 0, w.loc)
		p.End = time.Date(y, m+1, 1, 0, 0, 0, 0, w.loc)
		p.Label = periodLabel(y, "", int(m), -1)
	}
	return p, true
}

// periodAt is PeriodAt for the deduct path: the period of the last call is kept, so most
// calls compute nothing.
func (w *Window) periodAt(now time.Time) (*period, bool) {
	if w.period == nil {
		return nil, false
	}
	if p := w.period.Load(); p != nil && !now.Before(p.start) && now.Before(p.end) {
		return p, true
	}
	if w.Type == Fixed {
		return nil, false
	}
	found, ok := w.PeriodAt(now)
	if !ok {
		return nil, false
	}
	p := &period{start: found.Start, end: found.End, endMs: found.End.UnixMilli(), seg: w.id + "/" + found.Label}
	w.period.Store(p)
	return p, true
}

// periodLabel names a period without fmt: the year in four digits, sep, the month or ISO week
// in two, and the day in two unless it is -1 (20250309, 2025W10, 202503).
func periodLabel(year int, sep string, monthOrWeek, day int) string {
	var b []byte
	b = pad(b, year, 4)
	b = append(b, sep...)
	b = pad(b, monthOrWeek, 2)
	if day >= 0 {
		b = pad(b, day, 2)
	}
	return string(b)
}

func pad(b []byte, v, width int) []byte {
	var digits [20]byte
	s := strconv.AppendInt(digits[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
