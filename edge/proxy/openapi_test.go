package proxy

import (
	"context"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// openAPIPath is the API's document, from this package's directory; the operations the edge
// serves are marked `x-edge: true`.
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

// The operations the document marks x-edge are the ones the edge serves (Routes), and no
// other.
func TestOpenAPIMarksEveryEdgeRoute(t *testing.T) {
	var marked []Endpoint
	for path, item := range loadOpenAPI(t).Paths.Map() {
		for method, op := range item.Operations() {
			switch v := op.Extensions["x-edge"]; v {
			case nil, false:
			case true:
				marked = append(marked, Endpoint{Method: method, Path: path})
			default:
				t.Errorf("%s %s: x-edge is %v; want true or nothing", method, path, v)
			}
		}
	}
	served := Routes()
	for _, e := range served {
		if !slices.Contains(marked, e) {
			t.Errorf("%s %s is served by the edge (proxy.Routes) but not marked x-edge in %s", e.Method, e.Path, openAPIPath)
		}
	}
	for _, e := range marked {
		if !slices.Contains(served, e) {
			t.Errorf("%s %s is marked x-edge in %s but the edge does not serve it (proxy.Routes)", e.Method, e.Path, openAPIPath)
		}
	}
}
