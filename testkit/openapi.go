package testkit

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// OpenAPIPath is the API's document, docs/openapi.yaml, wherever the test runs from.
var OpenAPIPath = func() string {
	_, file, _, _ := runtime.Caller(0) // this file, testkit/openapi.go
	return filepath.Join(filepath.Dir(file), "..", "docs", "openapi.yaml")
}()

// OpenAPI loads the API's document and fails the test unless it is valid OpenAPI 3.
func OpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(OpenAPIPath)
	if err != nil {
		t.Fatalf("load %s: %v", OpenAPIPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI 3: %v", OpenAPIPath, err)
	}
	return doc
}
