package proxy

import (
	"slices"
	"testing"
	"vouchergate/testkit"
)

// The operations the document marks `x-edge: true` are the ones the edge serves (Routes),
// and no other.
func TestOpenAPIMarksEveryEdgeRoute(t *testing.T) {
	var marked []Endpoint
	for path, item := range testkit.OpenAPI(t).Paths.Map() {
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
			t.Errorf("%s %s is served by the edge (proxy.Routes) but not marked x-edge in %s", e.Method, e.Path, testkit.OpenAPIPath)
		}
	}
	for _, e := range marked {
		if !slices.Contains(served, e) {
			t.Errorf("%s %s is marked x-edge in %s but the edge does not serve it (proxy.Routes)", e.Method, e.Path, testkit.OpenAPIPath)
		}
	}
}
