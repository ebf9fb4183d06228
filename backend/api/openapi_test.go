package api_test

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"vouchergate/backend/api"
)

// openAPIPath is the API's document, from this package's directory.
const openAPIPath = "../../docs/openapi.yaml"

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI 3: %v", openAPIPath, err)
	}
	return doc
}

// The document names every route the server serves, and no other.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[api.Endpoint]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[api.Endpoint{Method: method, Path: path}] = true
		}
	}
	served := map[api.Endpoint]bool{}
	for _, e := range api.Routes() {
		served[e] = true
		if !documented[e] {
			t.Errorf("%s %s is served (api.Routes) but not in %s", e.Method, e.Path, openAPIPath)
		}
	}
	for e := range documented {
		if !served[e] {
			t.Errorf("%s %s is in %s but not served (api.Routes)", e.Method, e.Path, openAPIPath)
		}
	}
}
