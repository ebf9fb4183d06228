package voucher

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// serviceMetrics are the flash path's numbers: how many winners each group commit writes, how
// the compensating releases went, and each flash voucher's uses left.
type serviceMetrics struct {
	batchRows     prometheus.Histogram
	compensations *prometheus.CounterVec // result: released, nothing_held, failed
	// usesLeft is a flash sale's progress, as this backend last saw it in Redis: set from the
	// gate's answer to every take, refusal for lack of uses and give-back, and by
	// reconciliation. Several backends each show their own; the lowest is the latest.
	usesLeft *prometheus.GaugeVec // code
	// totalLimit is each flash voucher's total_limit, set when it is created, loaded, edited or
	// reconciled, so that a dashboard shows a new sale from its first second.
	totalLimit *prometheus.GaugeVec // code
}

func newServiceMetrics(reg prometheus.Registerer) serviceMetrics {
	m := serviceMetrics{
		batchRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vouchergate_flash_batch_rows",
			Help:    "Reservations written by one group commit (one transaction).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}}),
		compensations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_compensations_total",
			Help: "Compensating releases in Redis after a database write failed, by result (released; nothing_held: the use had gone back another way meanwhile; failed: left to the reconciler)."},
			[]string{"result"}),
		usesLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vouchergate_voucher_uses_left",
			Help: "A flash voucher's uses left in Redis, as this backend's gate calls and reconciliation last saw it."}, []string{"code"}),
		totalLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vouchergate_voucher_total_limit",
			Help: "A flash voucher's total_limit, as this backend last created, loaded, edited or reconciled it."}, []string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(m.batchRows, m.compensations, m.usesLeft, m.totalLimit)
	}
	return m
}

// showLimit sets v's total_limit gauge, for a flash voucher.
func (m serviceMetrics) showLimit(v Voucher) {
	if v.FlashSale {
		m.totalLimit.WithLabelValues(v.Code).Set(float64(v.TotalLimit))
	}
}

// forget drops a deleted voucher's gauges.
func (m serviceMetrics) forget(code string) {
	m.usesLeft.DeleteLabelValues(code)
	m.totalLimit.DeleteLabelValues(code)
}

// shown returns the codes this backend shows a gauge of.
func (m serviceMetrics) shown() map[string]bool {
	ch := make(chan prometheus.Metric)
	go func() {
		m.usesLeft.Collect(ch)
		m.totalLimit.Collect(ch)
		close(ch)
	}()
	codes := map[string]bool{}
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "code" {
				codes[l.GetValue()] = true
			}
		}
	}
	return codes
}
