package wire

import "testing"

func TestOutcomeCode(t *testing.T) {
	notValid := []byte(`{"valid":false,"error":"`)
	for _, tt := range []struct {
		body, prefix, want string
	}{
		{`{"error":"OUT_OF_STOCK"}`, string(ErrorPrefix), "OUT_OF_STOCK"},
		{`{"error":"BAD_REQUEST","message":"x"}`, string(ErrorPrefix), "BAD_REQUEST"},
		{`{"orderId":"o","discountAmount":1}`, string(ErrorPrefix), "OK"},
		{`{"error":""}`, string(ErrorPrefix), "OK"},
		{`{"error":"` + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456" + `"}`, string(ErrorPrefix), "OK"}, // 33 bytes: not a code
		{`{"valid":false,"error":"ALREADY_USED"}`, string(notValid), "ALREADY_USED"},
		{`{"valid":true,"discountAmount":5}`, string(notValid), "OK"},
	} {
		if got := OutcomeCode([]byte(tt.body), []byte(tt.prefix)); got != tt.want {
			t.Errorf("OutcomeCode(%s) = %q; want %q", tt.body, got, tt.want)
		}
	}
}
