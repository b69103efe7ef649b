package api_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/retrykit/retry/service/api"
)

// openAPI is the part of the document the tests read.
type openAPI struct {
	OpenAPI string                    `yaml:"openapi"`
	Paths   map[string]map[string]any `yaml:"paths"`
}

func loadOpenAPI(t *testing.T) (*openAPI, []byte) {
	t.Helper()
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	return &doc, raw
}

// The OpenAPI document lists exactly the routes the handler serves, plus
// the daemon's own (marked x-mounted-by: retryd).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	var documented, daemon []string
	for path, item := range doc.Paths {
		for method, op := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
			default:
				continue // parameters, summary, …
			}
			route := strings.ToUpper(method) + " " + path
			if op.(map[string]any)["x-mounted-by"] == "retryd" {
				daemon = append(daemon, route)
			} else {
				documented = append(documented, route)
			}
		}
	}
	var served []string
	for _, r := range api.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	slices.Sort(daemon)
	if !slices.Equal(documented, served) {
		t.Errorf("documented routes:\n  %s\nserved routes:\n  %s", strings.Join(documented, "\n  "), strings.Join(served, "\n  "))
	}
	if want := []string{"GET /healthz", "GET /metrics", "GET /readyz"}; !slices.Equal(daemon, want) {
		t.Errorf("daemon routes = %v, want %v", daemon, want)
	}
}

// Every $ref in the document points at a component it defines.
func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	_, raw := loadOpenAPI(t)
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					ref := x.(string)
					var node any = doc
					for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
						m, _ := node.(map[string]any)
						node = m[part]
					}
					if node == nil {
						t.Errorf("$ref %s points at nothing", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}
