package storetest

// TargetHostCases are target URLs of the kinds the API accepts, each with
// the host url.URL.Host gives it, lower-cased: what a store's migration
// that adds the target host (SQL's, not Go's) must find in the tasks
// stored before it. A new map at each call.
func TargetHostCases() map[string]string {
	return map[string]string{
		"http://example.com/hook":                  "example.com",
		"https://Example.COM:8443/p?q=1#f":         "example.com:8443",
		"http://user:pw@Host.example:80/":          "host.example:80",
		"http://a@b@host.example?x=/y":             "host.example",
		"HTTP://[::1]:9000":                        "[::1]:9000",
		"http://host.example?q=http://other.host/": "host.example",
		"http://host.example#http://other.host/":   "host.example",
		"https://api.example.com":                  "api.example.com",
		"http://path.example/a@b":                  "path.example",
		"http://query.example?x=a@b/c":             "query.example",
	}
}
