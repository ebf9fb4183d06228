package quota

import (
	"testing"
	"time"
)

func at(t *testing.T, s, tz string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation(time.DateTime, s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPeriodAt(t *testing.T) {
	const ny, sh = "America/New_York", "Asia/Shanghai"
	utc := func(s string) time.Time { return at(t, s, "UTC") }
	tests := []struct {
		name       string
		typ        WindowType
		tz         string
		now        time.Time
		start, end time.Time
		label      string
		hours      float64
	}{
		{"Shanghai day starts at 16:00 UTC", Day, sh, utc("2025-03-09 16:00:00"),
			utc("2025-03-09 16:00:00"), utc("2025-03-10 16:00:00"), "20250310", 24},
		{"Shanghai a second before midnight", Day, sh, utc("2025-03-09 15:59:59"),
			utc("2025-03-08 16:00:00"), utc("2025-03-09 16:00:00"), "20250309", 24},
		{"New York spring forward: a 23-hour day", Day, ny, at(t, "2025-03-09 12:00:00", ny),
			utc("2025-03-09 05:00:00"), utc("2025-03-10 04:00:00"), "20250309", 23},
		{"New York fall back: a 25-hour day", Day, ny, at(t, "2025-11-02 23:59:59", ny),
			utc("2025-11-02 04:00:00"), utc("2025-11-03 05:00:00"), "20251102", 25},
		{"ISO week: Sunday belongs to the week before", Week, sh, at(t, "2025-03-09 23:59:59", sh),
			at(t, "2025-03-03 00:00:00", sh), at(t, "2025-03-10 00:00:00", sh), "2025W10", 168},
		{"ISO week: Monday starts a new one", Week, sh, at(t, "2025-03-10 00:00:00", sh),
			at(t, "2025-03-10 00:00:00", sh), at(t, "2025-03-17 00:00:00", sh), "2025W11", 168},
		{"ISO week 1 of 2025 starts on 2024-12-30", Week, "UTC", utc("2025-01-01 12:00:00"),
			utc("2024-12-30 00:00:00"), utc("2025-01-06 00:00:00"), "2025W01", 168},
		{"ISO week across a DST change is 167 hours", Week, ny, at(t, "2025-03-09 12:00:00", ny),
			at(t, "2025-03-03 00:00:00", ny), at(t, "2025-03-10 00:00:00", ny), "2025W10", 167},
		{"month in Shanghai", Month, sh, utc("2025-02-28 16:00:00"),
			utc("2025-02-28 16:00:00"), utc("2025-03-31 16:00:00"), "202503", 31 * 24},
		{"February", Month, "UTC", utc("2024-02-29 23:59:59"),
			utc("2024-02-01 00:00:00"), utc("2024-03-01 00:00:00"), "202402", 29 * 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewCalendarWindow(tt.typ, tt.tz)
			if err != nil {
				t.Fatal(err)
			}
			p, ok := w.PeriodAt(tt.now)
			if !ok {
				t.Fatal("no period")
			}
			if !p.Start.Equal(tt.start) || !p.End.Equal(tt.end) || p.Label != tt.label {
				t.Fatalf("period [%v, %v) %q; want [%v, %v) %q", p.Start.UTC(), p.End.UTC(), p.Label,
					tt.start.UTC(), tt.end.UTC(), tt.label)
			}
			if h := p.End.Sub(p.Start).Hours(); h != tt.hours {
				t.Fatalf("period lasts %vh; want %vh", h, tt.hours)
			}
		})
	}
}

func TestFixedPeriod(t *testing.T) {
	start := time.Date(2025, 11, 11, 0, 0, 0, 0, time.UTC)
	w, err := NewFixedWindow(start, start.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		now  time.Time
		open bool
	}{
		{start.Add(-time.Millisecond), false},
		{start, true},
		{start.Add(24*time.Hour - time.Millisecond), true},
		{start.Add(24 * time.Hour), false},
	} {
		if _, ok := w.PeriodAt(c.now); ok != c.open {
			t.Errorf("PeriodAt(%v) open=%v; want %v", c.now, ok, c.open)
		}
	}
	if _, err := NewFixedWindow(start, start); err == nil {
		t.Error("an empty fixed window was accepted")
	}
}

func TestWindowIDRoundTrip(t *testing.T) {
	day, _ := NewCalendarWindow(Day, "America/New_York")
	roll, _ := NewRollingWindow(90 * time.Minute)
	fixed, _ := NewFixedWindow(time.UnixMilli(1700000000123), time.UnixMilli(1700086400000))
	for _, w := range []Window{day, roll, fixed} {
		got, err := ParseWindowID(w.ID())
		if err != nil {
			t.Fatalf("%s: %v", w.ID(), err)
		}
		if got.ID() != w.ID() || got.Type != w.Type || got.Size != w.Size || !got.Start.Equal(w.Start) ||
			!got.End.Equal(w.End) || got.Timezone != w.Timezone {
			t.Fatalf("%s parsed as %+v", w.ID(), got)
		}
	}
}

func TestWindowRefusals(t *testing.T) {
	for _, tz := range []string{"", "Mars/Olympus", "Local", "UTC:x", "Asia/{x}"} {
		if _, err := NewCalendarWindow(Day, tz); err == nil {
			t.Errorf("time zone %q accepted", tz)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, 367 * 24 * time.Hour} {
		if _, err := NewRollingWindow(d); err == nil {
			t.Errorf("rolling size %v accepted", d)
		}
	}
}

func FuzzParseWindowID(f *testing.F) {
	for _, s := range []string{"DAY/Asia/Shanghai", "ROLLING/86400000", "FIXED/1/2", "WEEK/", "FIXED/x", "ROLLING/-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		w, err := ParseWindowID(id)
		if err != nil {
			return
		}
		if w.ID() == "" {
			t.Fatalf("%q parsed to a window without an ID", id)
		}
		again, err := ParseWindowID(w.ID())
		if err != nil || again.ID() != w.ID() {
			t.Fatalf("%q -> %q does not round-trip: %v", id, w.ID(), err)
		}
	})
}

func FuzzParseRecord(f *testing.F) {
	f.Add("C\t1\t3\t1741536000000\tDAY/UTC/20250309\tDAY/UTC\tITEM:1001\n")
	f.Add("R\t2\t5\t86400000\tROLLING/86400000\tROLLING/86400000\tTYPE:GAME\n")
	f.Add("X\t\t\n")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := parseRecord(s)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.kind != 'C' && r.kind != 'R' {
				t.Fatalf("kind %q accepted", r.kind)
			}
		}
	})
}
