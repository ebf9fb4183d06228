package configs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// quantity is what a query's values are, read from its metrics' types and the functions around
// them. The types are read from the names, by the rules promtool and promlint hold every metric
// to (a counter's name ends in _total, a histogram is queried through _bucket, _sum and _count,
// a base unit ends the name: _seconds, _bytes); TestDashboardAndAlertsAgainstRunningProcesses
// checks the served metrics' real types against the same rules.
type quantity string

const (
	duration  quantity = "duration"   // a quantile or mean of a _seconds histogram
	perSecond quantity = "per second" // rate() of a counter of events
	cpuCores  quantity = "CPU cores"  // rate() of a _seconds_total counter: seconds per second
	count     quantity = "count"      // a gauge, or a quantile or mean of a histogram of counts
	byteSize  quantity = "bytes"      // a _bytes gauge
	ratio     quantity = "ratio"      // one rate or gauge over another
)

// unitsFor are Grafana's unit ids that read right for each quantity.
var unitsFor = map[quantity][]string{
	duration:  {"s", "ms"},
	perSecond: {"reqps", "ops", "cps", "eps"},
	cpuCores:  {"short", "none"},
	count:     {"short", "none"},
	byteSize:  {"bytes", "decbytes"},
	ratio:     {"percentunit"},
}

// quantityOf reads what expr's values are.
func quantityOf(expr string) (quantity, error) {
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		return "", fmt.Errorf("no metric in %q", expr)
	}
	counters, buckets := 0, 0
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, "_total"):
			counters++
		case strings.HasSuffix(n, "_bucket"):
			buckets++
		}
	}
	rated := strings.Contains(expr, "rate(") || strings.Contains(expr, "increase(")
	switch {
	case strings.Contains(expr, "histogram_quantile("):
		if buckets != len(names) {
			return "", fmt.Errorf("histogram_quantile of something besides a histogram's buckets: %q", expr)
		}
		return histogramQuantity(strings.TrimSuffix(names[0], "_bucket")), nil
	case strings.Contains(expr, " / "):
		// a histogram's _sum over its _count is its mean, in its own unit
		if len(names) == 2 {
			if base, ok := strings.CutSuffix(names[0], "_sum"); ok && names[1] == base+"_count" {
				return histogramQuantity(base), nil
			}
		}
		return ratio, nil
	case rated:
		if counters != len(names) {
			return "", fmt.Errorf("rate of a metric that is not a counter: %q", expr)
		}
		for _, n := range names {
			if !strings.HasSuffix(n, "_seconds_total") {
				return perSecond, nil
			}
		}
		return cpuCores, nil
	case counters > 0 || buckets > 0:
		return "", fmt.Errorf("a counter or histogram shown raw, without rate(): %q", expr)
	case strings.HasSuffix(names[0], "_bytes"):
		return byteSize, nil
	}
	return count, nil
}

func histogramQuantity(family string) quantity {
	if strings.HasSuffix(family, "_seconds") {
		return duration
	}
	return count
}

// panel is the part of a Grafana panel the unit check reads.
type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit   string `json:"unit"`
			Custom struct {
				AxisPlacement string `json:"axisPlacement"`
			} `json:"custom"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
}

// unitAndAxis is the unit and the y axis (left or right) the panel gives query refID.
func (p panel) unitAndAxis(refID string) (unit, axis string) {
	unit, axis = p.FieldConfig.Defaults.Unit, p.FieldConfig.Defaults.Custom.AxisPlacement
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byFrameRefID" || o.Matcher.Options != refID {
			continue
		}
		for _, prop := range o.Properties {
			v, _ := prop.Value.(string)
			switch prop.ID {
			case "unit":
				unit = v
			case "custom.axisPlacement":
				axis = v
			}
		}
	}
	if axis == "" || axis == "auto" {
		axis = "left"
	}
	return unit, axis
}

func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("grafana", "vouchergate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("vouchergate.json: %v", err)
	}
	return dash.Panels
}

// Every panel reads right: each query's unit is one for what its values are (errors per second
// never on a seconds axis, CPU seconds per second not as a duration, a ratio as a percentage),
// set on the panel or by an override for that query, and each y axis carries one unit and one
// quantity: goroutines apart from CPU cores, gauges apart from rates, the second on the right.
func TestDashboardUnitsMatchTheQueries(t *testing.T) {
	for _, p := range dashboardPanels(t) {
		if p.Type == "row" {
			continue
		}
		type axisUse struct {
			units      []string
			quantities []quantity
		}
		axes := map[string]*axisUse{}
		for _, tg := range p.Targets {
			q, err := quantityOf(tg.Expr)
			if err != nil {
				t.Errorf("panel %q, query %s: %v", p.Title, tg.RefID, err)
				continue
			}
			unit, axis := p.unitAndAxis(tg.RefID)
			if !slices.Contains(unitsFor[q], unit) {
				t.Errorf("panel %q, query %s (%s) has unit %q; want one of %v: %s", p.Title, tg.RefID, q, unit, unitsFor[q], tg.Expr)
			}
			if p.Type != "timeseries" {
				axis = "the panel's" // one scale: no second axis
			}
			a := axes[axis]
			if a == nil {
				a = &axisUse{}
				axes[axis] = a
			}
			if !slices.Contains(a.units, unit) {
				a.units = append(a.units, unit)
			}
			if !slices.Contains(a.quantities, q) {
				a.quantities = append(a.quantities, q)
			}
		}
		for axis, a := range axes {
			if len(a.units) > 1 || len(a.quantities) > 1 {
				t.Errorf("panel %q: the %s axis carries %v in %v; want one quantity in one unit per axis (an override with custom.axisPlacement right for the second)",
					p.Title, axis, a.quantities, a.units)
			}
		}
	}
}

// The check reads the dashboard's kinds of query as intended.
func TestQuantityOfAQuery(t *testing.T) {
	for expr, want := range map[string]quantity{
		`histogram_quantile(0.99, sum by (le) (rate(vouchergate_http_request_duration_seconds_bucket[1m])))`:             duration,
		`histogram_quantile(0.5, sum by (le) (rate(vouchergate_flash_batch_rows_bucket[1m])))`:                           count,
		`sum(rate(vouchergate_flash_batch_rows_sum[1m])) / sum(rate(vouchergate_flash_batch_rows_count[1m]))`:            count,
		`sum by (command) (rate(vouchergate_redis_command_errors_total[1m]))`:                                            perSecond,
		`sum by (job) (rate(process_cpu_seconds_total[1m]))`:                                                             cpuCores,
		`sum(rate(vouchergate_http_requests_total{status=~"5.."}[1m])) / sum(rate(vouchergate_http_requests_total[1m]))`: ratio,
		`sum by (job) (go_goroutines)`:       count,
		`redis_memory_used_bytes`:            byteSize,
		`vouchergate_pg_pool_acquired_conns`: count,
	} {
		if got, err := quantityOf(expr); err != nil || got != want {
			t.Errorf("quantityOf(%s) = %q, %v; want %q", expr, got, err, want)
		}
	}
	for _, bad := range []string{`vouchergate_http_requests_total`, `rate(go_goroutines[1m])`} {
		if q, err := quantityOf(bad); err == nil {
			t.Errorf("quantityOf(%s) = %q; want an error", bad, q)
		}
	}
}
