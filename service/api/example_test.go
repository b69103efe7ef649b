package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store/sqlite"
)

// The API over an embedded store: register a policy; registering it again
// with the same settings answers 200, with others 409.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "retryd-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	h, err := api.New(api.Config{Store: st})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, body := range []string{
		`{"policyId":"webhooks","backoff":"EXPONENTIAL","initialDelayMs":200,"maxAttempts":5}`,
		`{"policyId":"webhooks","maxAttempts":5,"initialDelayMs":200}`,
		`{"policyId":"webhooks","maxAttempts":6}`,
	} {
		resp, err := http.Post(srv.URL+"/retry-policies", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	// Output:
	// 201 {"policyId":"webhooks","backoff":"EXPONENTIAL","initialDelayMs":200,"multiplier":2,"incrementMs":200,"minDelayMs":0,"maxDelayMs":30000,"jitterType":"FULL","jitterFactor":0.1,"maxAttempts":5,"totalBudgetMs":0,"callTimeMs":0,"attemptTimeoutMs":0,"maxRetryAfterMs":300000,"retryableStatusCodes":[408,425,429,500,502,503,504]}
	// 200 {"policyId":"webhooks","backoff":"EXPONENTIAL","initialDelayMs":200,"multiplier":2,"incrementMs":200,"minDelayMs":0,"maxDelayMs":30000,"jitterType":"FULL","jitterFactor":0.1,"maxAttempts":5,"totalBudgetMs":0,"callTimeMs":0,"attemptTimeoutMs":0,"maxRetryAfterMs":300000,"retryableStatusCodes":[408,425,429,500,502,503,504]}
	// 409 {"error":{"code":"conflict","message":"policy \"webhooks\" is registered with other settings; policies are immutable, register a new policyId","field":"policyId"}}
}
