package voucher

import "github.com/prometheus/client_golang/prometheus"

// serviceMetrics are the flash path's numbers: how many winners each group commit writes, how
// the compensating releases went, and each flash voucher's uses left.
type serviceMetrics struct {
	batchRows     prometheus.Histogram
	compensations *prometheus.CounterVec // result: released, nothing_held, failed
	// usesLeft is a flash sale's progress, as this backend last saw it in Redis: set from the
	// gate's answer to every take, refusal for lack of uses and give-back, and by
	// reconciliation. Several backends each show their own; the lowest is the latest.
	usesLeft *prometheus.GaugeVec // code
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
	}
	if reg != nil {
		reg.MustRegister(m.batchRows, m.compensations, m.usesLeft)
	}
	return m
}
