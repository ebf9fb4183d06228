package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/valyala/fasthttp"

	"vouchergate/backend/api"
	"vouchergate/backend/app"
	"vouchergate/backend/backendtest"
	"vouchergate/testkit"
)

// openAPIClock is when the document's examples happen: its vouchers run through December 2026.
var openAPIClock = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// The document names every route the server serves, on its public port or its ops listener
// (/metrics), and no other.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := testkit.OpenAPI(t)
	documented := map[api.Endpoint]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[api.Endpoint{Method: method, Path: path}] = true
		}
	}
	served := map[api.Endpoint]bool{}
	for _, e := range append(api.Routes(), api.OpsRoutes()...) {
		served[e] = true
		if !documented[e] {
			t.Errorf("%s %s is served (api.Routes) but not in %s", e.Method, e.Path, testkit.OpenAPIPath)
		}
	}
	for e := range documented {
		if !served[e] {
			t.Errorf("%s %s is in %s but not served (api.Routes)", e.Method, e.Path, testkit.OpenAPIPath)
		}
	}
}

// scenario is one request of the document's story, sent to a real backend: its request and
// its answer must both match the document.
type scenario struct {
	name   string
	method string
	uri    string // path and query, parameters filled in
	// example names the operation's request body example to send; body is sent instead when the
	// request is not one the document should hold as an example (it breaks its schema).
	example, body string
	noToken       bool   // send an admin path without the token
	apiKey        string // a service API key to send as X-API-Key
	// invalid: the request breaks the document on purpose; ValidateRequest must refuse it.
	invalid bool
	status  int
	code    string // the error code of a 4xx or 5xx answer
	// answer names the documented example of the answer that the body must equal, times compared
	// as instants, the fields named in vary left out; "" checks the schema only.
	answer string
	vary   []string
}

// opsScenarios are sent to the ops listener (VG_BACKEND_OPS_ADDR).
var opsScenarios = []scenario{
	{name: "metrics", method: "GET", uri: "/metrics", status: 200},
	{name: "healthz", method: "GET", uri: "/healthz", status: 200, answer: "ok"},
	{name: "readyz", method: "GET", uri: "/readyz", status: 200, answer: "ready"},
}

// openAPIScenarios tell the document's story in order: each depends on those before it.
var openAPIScenarios = []scenario{
	{name: "healthz", method: "GET", uri: "/healthz", status: 200, answer: "ok"},
	{name: "readyz", method: "GET", uri: "/readyz", status: 200, answer: "ready"},

	{name: "create flash voucher", method: "POST", uri: "/admin/vouchers", example: "flash", status: 201, answer: "flash"},
	{name: "create normal voucher", method: "POST", uri: "/admin/vouchers", example: "normal", status: 201, answer: "normal"},
	{name: "create an existing voucher", method: "POST", uri: "/admin/vouchers", example: "flash", status: 409, code: "VOUCHER_EXISTS", answer: "exists"},
	{name: "create a voucher ending before it starts", method: "POST", uri: "/admin/vouchers", example: "endsBeforeStart", status: 400, code: "BAD_REQUEST"},
	{name: "create without the admin token", method: "POST", uri: "/admin/vouchers", example: "normal", noToken: true, invalid: true,
		status: 401, code: "UNAUTHORIZED", answer: "noToken"},

	{name: "validate", method: "POST", uri: "/vouchers/FLASH100/validate", example: "first", status: 200, answer: "valid"},
	{name: "validate an unknown voucher", method: "POST", uri: "/vouchers/NOPE/validate", example: "first", status: 404, code: "VOUCHER_NOT_FOUND"},
	{name: "validate without orderAmount", method: "POST", uri: "/vouchers/FLASH100/validate",
		body: `{"customerId":42,"orderId":"order-4"}`, invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "reserve", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "first", status: 201, answer: "first"},
	{name: "validate a granted order", method: "POST", uri: "/vouchers/FLASH100/validate", example: "first", status: 200, answer: "valid"},
	{name: "reserve the same order again", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "retry", status: 201, answer: "first"},
	{name: "reserve the last use", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "secondCustomer", status: 201, answer: "secondCustomer"},
	{name: "validate over the limit", method: "POST", uri: "/vouchers/FLASH100/validate", example: "soldOut", status: 200, code: "OUT_OF_STOCK", answer: "soldOut"},
	{name: "reserve over the limit", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "soldOut", status: 409, code: "OUT_OF_STOCK", answer: "soldOut"},
	{name: "sold-out state with its holders", method: "GET", uri: "/vouchers/FLASH100/state", status: 200},
	{name: "reserve without orderAmount", method: "POST", uri: "/vouchers/FLASH100/reservations",
		body: `{"customerId":42,"orderId":"order-4"}`, invalid: true, status: 400, code: "BAD_REQUEST", answer: "missingAmount"},
	{name: "reserve with a customerId that is no integer", method: "POST", uri: "/vouchers/FLASH100/reservations",
		body: `{"customerId":4.2,"orderId":"order-4","orderAmount":500}`, invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "reserve with a body over the limit", method: "POST", uri: "/vouchers/FLASH100/reservations",
		body:   `{"customerId":42,"orderId":"order-5","orderAmount":500,"note":"` + strings.Repeat("x", 8192) + `"}`,
		status: 413, code: "PAYLOAD_TOO_LARGE"},
	{name: "reserve an unknown voucher", method: "POST", uri: "/vouchers/NOPE/reservations", example: "first", status: 404, code: "VOUCHER_NOT_FOUND", answer: "unknown"},
	{name: "reserve with a malformed code", method: "POST", uri: "/vouchers/FLASH%20100/reservations", example: "first", invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "validate with the code in lower case", method: "POST", uri: "/vouchers/flash100/validate", example: "first", status: 200, answer: "valid"},

	{name: "confirm", method: "POST", uri: "/vouchers/FLASH100/reservations/order-1/confirm", status: 200, answer: "confirmed"},
	{name: "confirm again", method: "POST", uri: "/vouchers/FLASH100/reservations/order-1/confirm", status: 200, answer: "confirmed"},
	{name: "release a confirmed reservation", method: "DELETE", uri: "/vouchers/FLASH100/reservations/order-1", status: 409, code: "RESERVATION_CONFIRMED", answer: "confirmed"},
	{name: "release", method: "DELETE", uri: "/vouchers/FLASH100/reservations/order-2", status: 200, answer: "released"},
	{name: "confirm a released reservation", method: "POST", uri: "/vouchers/FLASH100/reservations/order-2/confirm", status: 409, code: "RESERVATION_RELEASED", answer: "released"},
	{name: "reserve a released order again", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "secondCustomer", status: 409, code: "RESERVATION_RELEASED"},
	{name: "confirm an unknown order", method: "POST", uri: "/vouchers/FLASH100/reservations/order-9/confirm", status: 404, code: "RESERVATION_NOT_FOUND", answer: "unknownOrder"},
	{name: "state after a release", method: "GET", uri: "/vouchers/FLASH100/state", status: 200},
	{name: "sold-out state of an unknown voucher", method: "GET", uri: "/vouchers/NOPE/state", status: 200},

	{name: "validate below the minimum", method: "POST", uri: "/vouchers/WELCOME10/validate", example: "belowMinimum", status: 200, code: "NOT_ELIGIBLE", answer: "belowMinimum"},
	{name: "reserve below the minimum", method: "POST", uri: "/vouchers/WELCOME10/reservations", example: "belowMinimum", status: 422, code: "NOT_ELIGIBLE", answer: "belowMinimum"},
	{name: "reserve a normal voucher", method: "POST", uri: "/vouchers/WELCOME10/reservations", example: "normal", status: 201, answer: "normal"},
	{name: "reserve past the customer's limit", method: "POST", uri: "/vouchers/WELCOME10/reservations", example: "secondOrder",
		status: 409, code: "ALREADY_USED", answer: "alreadyUsed"},

	{name: "admin get", method: "GET", uri: "/admin/vouchers/FLASH100", status: 200, answer: "flash"},
	{name: "admin get an unknown voucher", method: "GET", uri: "/admin/vouchers/NOPE", status: 404, code: "VOUCHER_NOT_FOUND", answer: "unknown"},
	{name: "warm up", method: "POST", uri: "/admin/vouchers/FLASH100/warmup", status: 200},
	{name: "expire", method: "POST", uri: "/admin/expire", status: 200, answer: "none"},
	{name: "reconcile", method: "POST", uri: "/admin/reconcile?code=FLASH100", status: 200},
	{name: "reconcile an unknown voucher", method: "POST", uri: "/admin/reconcile?code=NOPE", status: 404, code: "VOUCHER_NOT_FOUND"},
	{name: "warm up an unknown voucher", method: "POST", uri: "/admin/vouchers/NOPE/warmup", status: 404, code: "VOUCHER_NOT_FOUND"},

	{name: "quota rule", method: "POST", uri: "/admin/quota-rules", example: "dayRule", status: 201, answer: "dayRule", vary: []string{"createdAt", "updatedAt"}},
	{name: "quota rules", method: "GET", uri: "/admin/quota-rules?bizId=1", status: 200, answer: "biz1", vary: []string{"createdAt", "updatedAt"}},
	{name: "quota rule by id", method: "GET", uri: "/admin/quota-rules/1", status: 200, answer: "dayRule", vary: []string{"createdAt", "updatedAt"}},
	{name: "check", method: "POST", uri: "/quotas/check", example: "twoOfItem", status: 200, answer: "twoOfItem"},
	{name: "check with an unknown field", method: "POST", uri: "/quotas/check",
		body: `{"bizId":1,"idemKey":"k","items":[],"coupon":"x"}`, invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "deduct", method: "POST", uri: "/quotas/deduct", example: "twoOfItem", status: 200, answer: "twoOfItem"},
	{name: "check a deducted idemKey", method: "POST", uri: "/quotas/check", example: "twoOfItem", status: 200, answer: "twoOfItem"},
	{name: "check over the limit", method: "POST", uri: "/quotas/check", example: "twoMore", status: 200, code: "QUOTA_EXCEEDED", answer: "twoMore"},
	{name: "deduct again", method: "POST", uri: "/quotas/deduct", example: "twoOfItem", status: 200, answer: "twoOfItem"},
	{name: "deduct over the limit", method: "POST", uri: "/quotas/deduct", example: "twoMore", status: 409, code: "QUOTA_EXCEEDED", answer: "twoMore"},
	{name: "deduct with an unknown field", method: "POST", uri: "/quotas/deduct",
		body: `{"bizId":1,"idemKey":"k","items":[],"coupon":"x"}`, invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "usage", method: "GET", uri: "/quotas/usage?bizId=1&identityType=USER&identity=42&dimension=ITEM:1001", status: 200, answer: "afterFirst"},
	{name: "usage without bizId", method: "GET", uri: "/quotas/usage?identityType=USER&identity=42", invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "rollback", method: "POST", uri: "/quotas/rollback", example: "first", status: 200, answer: "first"},
	{name: "check a rolled back idemKey", method: "POST", uri: "/quotas/check", example: "twoOfItem", status: 200, code: "QUOTA_ROLLED_BACK", answer: "rolledBack"},
	{name: "delete quota rule", method: "DELETE", uri: "/admin/quota-rules/1", status: 200},
	{name: "deleted quota rule", method: "GET", uri: "/admin/quota-rules/1", status: 404, code: "QUOTA_RULE_NOT_FOUND", answer: "deleted"},
}

// listViewScenarios are the admin list views (issue 13), run after openAPIScenarios, whose
// story they read: FLASH100 has order-1 CONFIRMED and order-2 RELEASED; WELCOME10 order-11.
var listViewScenarios = []scenario{
	{name: "list vouchers", method: "GET", uri: "/admin/vouchers?limit=1", status: 200, answer: "firstPage"},
	{name: "list vouchers after FLASH100", method: "GET", uri: "/admin/vouchers?limit=1&after=FLASH100", status: 200},
	{name: "list vouchers by the default page", method: "GET", uri: "/admin/vouchers", status: 200},
	{name: "list vouchers with limit 0", method: "GET", uri: "/admin/vouchers?limit=0", invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "list vouchers with limit 501", method: "GET", uri: "/admin/vouchers?limit=501", invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "list confirmed redemptions", method: "GET", uri: "/admin/vouchers/FLASH100/redemptions?status=CONFIRMED", status: 200, answer: "confirmed"},
	{name: "list a customer's redemptions", method: "GET", uri: "/admin/vouchers/FLASH100/redemptions?customerId=42&limit=10", status: 200, answer: "confirmed"},
	{name: "list redemptions one at a time", method: "GET", uri: "/admin/vouchers/FLASH100/redemptions?limit=1", status: 200},
	{name: "list redemptions of a bad status", method: "GET", uri: "/admin/vouchers/FLASH100/redemptions?status=USED", invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "list redemptions of an unknown voucher", method: "GET", uri: "/admin/vouchers/NOPE/redemptions", status: 404, code: "VOUCHER_NOT_FOUND"},
}

// campaignScenarios run after listViewScenarios, whose story they go on with: FLASH100 (2 uses)
// has order-1 CONFIRMED and order-2 RELEASED; WELCOME10 order-11 RESERVED.
var campaignScenarios = []scenario{
	{name: "raise a limit", method: "PATCH", uri: "/admin/vouchers/FLASH100", example: "raise", status: 200, answer: "raised"},
	{name: "pause", method: "PATCH", uri: "/admin/vouchers/flash100", example: "pause", status: 200},
	{name: "reserve a paused voucher", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "whilePaused",
		status: 422, code: "NOT_ELIGIBLE", answer: "paused"},
	{name: "validate a paused voucher", method: "POST", uri: "/vouchers/FLASH100/validate", example: "whilePaused",
		status: 200, code: "NOT_ELIGIBLE", answer: "paused"},
	{name: "a granted order's retry while paused", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "first", status: 201, answer: "first"},
	{name: "paused vouchers", method: "GET", uri: "/admin/vouchers?active=false", status: 200},
	{name: "resume", method: "PATCH", uri: "/admin/vouchers/FLASH100", example: "resume", status: 200},
	{name: "lower a limit below the uses taken", method: "PATCH", uri: "/admin/vouchers/FLASH100", example: "belowUsed",
		status: 409, code: "LIMIT_BELOW_USED", answer: "belowUsed"},
	{name: "edit with a misspelt field", method: "PATCH", uri: "/admin/vouchers/FLASH100", body: `{"totalLimt":3}`,
		invalid: true, status: 400, code: "BAD_REQUEST"},
	{name: "edit an unknown voucher", method: "PATCH", uri: "/admin/vouchers/NOPE", example: "raise", status: 404, code: "VOUCHER_NOT_FOUND"},
	{name: "a percentage instead", method: "PATCH", uri: "/admin/vouchers/WELCOME10", example: "percent", status: 200},
	{name: "changes", method: "GET", uri: "/admin/vouchers/FLASH100/changes", status: 200, answer: "flash"},
	{name: "changes of an unknown voucher", method: "GET", uri: "/admin/vouchers/NOPE/changes", status: 404, code: "VOUCHER_NOT_FOUND"},
	{name: "refund", method: "POST", uri: "/vouchers/FLASH100/reservations/order-1/refund", status: 200, answer: "refunded"},
	{name: "refund again", method: "POST", uri: "/vouchers/flash100/reservations/order-1/refund", status: 200, answer: "refunded"},
	{name: "refund a reservation not confirmed", method: "POST", uri: "/vouchers/WELCOME10/reservations/order-11/refund",
		status: 409, code: "RESERVATION_NOT_CONFIRMED", answer: "notConfirmed"},
	{name: "refund a released reservation", method: "POST", uri: "/vouchers/FLASH100/reservations/order-2/refund",
		status: 409, code: "RESERVATION_RELEASED", answer: "released"},
	{name: "refund an unknown order", method: "POST", uri: "/vouchers/FLASH100/reservations/order-9/refund",
		status: 404, code: "RESERVATION_NOT_FOUND", answer: "unknownOrder"},
	{name: "delete a voucher in use", method: "DELETE", uri: "/admin/vouchers/FLASH100", status: 409, code: "VOUCHER_IN_USE", answer: "inUse"},
	{name: "create a percentage voucher", method: "POST", uri: "/admin/vouchers", example: "spare", status: 201, answer: "spare"},
	{name: "delete a voucher never redeemed", method: "DELETE", uri: "/admin/vouchers/SPARE-1", status: 204},
	{name: "delete it again", method: "DELETE", uri: "/admin/vouchers/spare-1", status: 404, code: "VOUCHER_NOT_FOUND"},
}

// readerKey is the one service API key of keyScenarios' backend, of scope read only.
var readerKey = backendtest.APIKey{Name: "reader", Secret: "reader-secret-0123456789abcdef", Scopes: []string{"read"}}

// keyScenarios run against a backend with VG_API_KEYS_FILE set, listing readerKey: the answers
// to a missing key and to a key without the operation's scope.
var keyScenarios = []scenario{
	{name: "reserve without a service API key", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "first",
		status: 401, code: "UNAUTHORIZED", answer: "noKey"},
	{name: "reserve with a key of scope read", method: "POST", uri: "/vouchers/FLASH100/reservations", example: "first",
		apiKey: readerKey.Secret, status: 403, code: "FORBIDDEN", answer: "noScope"},
}

// notReadyScenarios run against the API served with stub probes, PostgreSQL's failing as the
// document's example says: a real backend's pgx error names more than the dial (and its wording
// is pgx's), so the example could not be the answer of a stopped PostgreSQL word for word.
var notReadyScenarios = []scenario{
	{name: "readyz with PostgreSQL refusing connections", method: "GET", uri: "/readyz", status: 503, answer: "notReady"},
}

// The document's examples, run in order against a real backend: every request is one the
// document takes (or refuses, when meant to) and every answer is documented for its operation,
// its body matching the schema and, where named, the example.
func TestOpenAPIExamplesAgainstBackend(t *testing.T) {
	doc := testkit.OpenAPI(t)
	b := backendtest.Start(t, backendtest.Config(t), app.WithClock(testkit.NewManualClock(openAPIClock)))
	ran := map[exampleKey]bool{}
	r := newOpenAPIRunner(t, doc, b.URL, ran)
	for _, sc := range openAPIScenarios {
		t.Run(sc.name, func(t *testing.T) { r.run(t, sc) })
	}
	for _, sc := range listViewScenarios {
		t.Run("list view/"+sc.name, func(t *testing.T) { r.run(t, sc) })
	}
	for _, sc := range campaignScenarios {
		t.Run("campaign/"+sc.name, func(t *testing.T) { r.run(t, sc) })
	}
	for _, sc := range quotaPlatformScenarios {
		t.Run("quota platform/"+sc.name, func(t *testing.T) { r.run(t, sc) })
	}
	ops := newOpenAPIRunner(t, doc, b.OpsURL, ran)
	for _, sc := range opsScenarios {
		t.Run("ops listener/"+sc.name, func(t *testing.T) { ops.run(t, sc) })
	}

	keyed := backendtest.Config(t)
	keyed.APIKeysFile = filepath.Join(t.TempDir(), "keys.yaml")
	backendtest.WriteKeys(t, keyed.APIKeysFile, readerKey)
	r = newOpenAPIRunner(t, doc, backendtest.Start(t, keyed).URL, ran)
	for _, sc := range keyScenarios {
		t.Run("api keys/"+sc.name, func(t *testing.T) { r.run(t, sc) })
	}

	r = newOpenAPIRunner(t, doc, serveWithProbes(t, []api.Probe{
		{Name: "postgres", Required: true, Check: func(context.Context) error {
			return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		}},
		{Name: "redis", Required: true, Check: func(context.Context) error { return nil }},
		{Name: "nats", Check: func(context.Context) error { return nil }},
	}), ran)
	for _, sc := range notReadyScenarios {
		t.Run("not ready/"+sc.name, func(t *testing.T) { r.run(t, sc) })
	}

	for key := range documentedExamples(doc) {
		if !ran[key] {
			t.Errorf("the example %q of %s is run by no scenario", key.name, key.where)
		}
	}
}

// serveWithProbes serves the API with only probes (no stores) on a free port until the test
// ends, and returns its URL.
func serveWithProbes(t *testing.T, probes []api.Probe) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: api.New(api.Options{Probes: probes}).Handle}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// exampleKey names one documented example: where it is written (an operation's request body,
// an operation's answer of one status, or a shared answer of components/responses, which
// counts as run when any operation using it ran it) and its name.
type exampleKey struct{ where, name string }

func requestExampleKey(op *openapi3.Operation, name string) exampleKey {
	if ref := op.RequestBody.Ref; ref != "" {
		return exampleKey{ref, name}
	}
	return exampleKey{op.OperationID + " request", name}
}

func answerExampleKey(op *openapi3.Operation, status string, resp *openapi3.ResponseRef, name string) exampleKey {
	if resp.Ref != "" {
		return exampleKey{resp.Ref, name}
	}
	return exampleKey{op.OperationID + " " + status, name}
}

// documentedExamples is every example of a request or an answer body in doc.
func documentedExamples(doc *openapi3.T) map[exampleKey]bool {
	all := map[exampleKey]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Value.Content {
					for name := range mt.Examples {
						all[requestExampleKey(op, name)] = true
					}
				}
			}
			for status, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					for name := range mt.Examples {
						all[answerExampleKey(op, status, resp, name)] = true
					}
				}
			}
		}
	}
	return all
}

type openAPIRunner struct {
	doc    *openapi3.T
	router routers.Router
	url    string
	client *http.Client
	ran    map[exampleKey]bool // the examples run so far
}

// newOpenAPIRunner checks requests to the server at url against doc, noting in ran the
// examples it runs.
func newOpenAPIRunner(t *testing.T, doc *openapi3.T, url string, ran map[exampleKey]bool) openAPIRunner {
	t.Helper()
	doc.Servers = openapi3.Servers{{URL: url}} // the router finds operations under this server only
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return openAPIRunner{doc: doc, router: router, url: url, client: &http.Client{Timeout: time.Minute}, ran: ran}
}

var openAPIOptions = &openapi3filter.Options{
	IncludeResponseStatus: true,
	SkipSettingDefaults:   true,
	MultiError:            true,
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if in.RequestValidationInput.Request.Header.Get("Authorization") != "Bearer "+backendtest.Token {
			return errors.New("no admin bearer token")
		}
		return nil
	},
}

// run sends sc and checks the request and the answer against the document.
func (r openAPIRunner) run(t *testing.T, sc scenario) {
	body := []byte(sc.body)
	if sc.example != "" {
		body = r.requestExample(t, sc)
	}
	req := r.request(t, sc, body)
	route, params, err := r.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: no documented operation: %v", sc.method, sc.uri, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: openAPIOptions}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case sc.invalid && err == nil:
		t.Errorf("the document takes this request, which it should refuse: %s", body)
	case !sc.invalid && err != nil:
		t.Errorf("the request does not match the document: %v", err)
	}

	resp, err := r.client.Do(r.request(t, sc, body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != sc.status || errorCode(got) != sc.code {
		t.Errorf("answered %d %s; want %d %s", resp.StatusCode, got, sc.status, sc.code)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Options: openAPIOptions}
	out.SetBodyBytes(got)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("the answer %d %s does not match the document: %v", resp.StatusCode, got, err)
	}
	if sc.example != "" {
		r.ran[requestExampleKey(route.Operation, sc.example)] = true
	}
	if sc.answer != "" {
		want := answerExample(t, route.Operation, resp.StatusCode, sc.answer)
		r.ran[answerExampleKey(route.Operation, strconv.Itoa(resp.StatusCode), route.Operation.Responses.Status(resp.StatusCode), sc.answer)] = true
		if g, w := normalized(t, got, sc.vary), normalized(t, want, sc.vary); !reflect.DeepEqual(g, w) {
			t.Errorf("the answer is not the documented example %q:\n got %s\nwant %s", sc.answer, got, want)
		}
	}
}

func (r openAPIRunner) request(t *testing.T, sc scenario, body []byte) *http.Request {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(sc.method, r.url+sc.uri, rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(sc.uri, "/admin/") && !sc.noToken {
		req.Header.Set("Authorization", "Bearer "+backendtest.Token)
	}
	if sc.apiKey != "" {
		req.Header.Set("X-API-Key", sc.apiKey)
	}
	return req
}

// requestExample is the JSON of the request body example sc names.
func (r openAPIRunner) requestExample(t *testing.T, sc scenario) []byte {
	t.Helper()
	path, _, _ := strings.Cut(sc.uri, "?")
	route, _, err := r.router.FindRoute(httpRequest(t, sc.method, r.url+path))
	if err != nil || route.Operation.RequestBody == nil {
		t.Fatalf("%s %s documents no request body: %v", sc.method, path, err)
	}
	mt := route.Operation.RequestBody.Value.Content.Get("application/json")
	ex, ok := mt.Examples[sc.example]
	if !ok {
		t.Fatalf("%s %s has no request example %q", sc.method, path, sc.example)
	}
	b, err := json.Marshal(ex.Value.Value)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answerExample is the JSON of the example named of op's answer status.
func answerExample(t *testing.T, op *openapi3.Operation, status int, name string) []byte {
	t.Helper()
	resp := op.Responses.Status(status)
	if resp == nil {
		t.Fatalf("%s documents no %d", op.OperationID, status)
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Examples[name] == nil {
		t.Fatalf("%s's %d has no example %q", op.OperationID, status, name)
	}
	b, err := json.Marshal(mt.Examples[name].Value.Value)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func httpRequest(t *testing.T, method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// errorCode is the error code of an error body, "" for any other.
func errorCode(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error
}

// normalized decodes a JSON body for comparison: times become UTC instants, and the fields
// named in vary are left out at any depth.
func normalized(t *testing.T, body []byte, vary []string) any {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if slices.Contains(vary, k) {
					delete(v, k)
					continue
				}
				v[k] = walk(x)
			}
		case []any:
			for i, x := range v {
				v[i] = walk(x)
			}
		case string:
			if tm, err := time.Parse(time.RFC3339, v); err == nil {
				return tm.UTC().Format(time.RFC3339Nano)
			}
		}
		return v
	}
	return walk(v)
}
