package voucher

import "github.com/prometheus/client_golang/prometheus"

// serviceMetrics are the flash path's numbers: how many winners each group commit writes, and
// how the compensating releases went.
type serviceMetrics struct {
	batchRows     prometheus.Histogram
	compensations *prometheus.CounterVec // result: released, failed
}

func newServiceMetrics(reg prometheus.Registerer) serviceMetrics {
	m := serviceMetrics{
		batchRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vouchergate_flash_batch_rows",
			Help:    "Reservations written by one group commit (one transaction).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}}),
		compensations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vouchergate_compensations_total",
			Help: "Compensating releases in Redis after a database write failed, by result (released, failed: left to the reconciler)."},
			[]string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.batchRows, m.compensations)
	}
	return m
}
