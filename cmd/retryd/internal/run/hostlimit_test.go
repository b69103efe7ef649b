package run_test

import "testing"

func TestHostLimiterFlags(t *testing.T) {
	t.Parallel()
	c, err := parseArgs(t, nil, nil)
	if err != nil || c.HostLimiter {
		t.Errorf("default: host limiter %v, %v; want off (opt-in per policy)", c.HostLimiter, err)
	}
	c, err = parseArgs(t, []string{"--host-limiter", "on"}, nil)
	if err != nil || !c.HostLimiter {
		t.Errorf("--host-limiter on: %v, %v; want on", c.HostLimiter, err)
	}
	c, err = parseArgs(t, nil, map[string]string{"RETRYD_HOST_LIMITER": "off", "RETRYD_HOST_LIMITER_CONFIG": `{"floor": 5, "increase": 50}`})
	if err != nil || c.HostLimiter || c.HostLimiterConfig.Floor != 5 || c.HostLimiterConfig.Increase != 50 {
		t.Errorf("environment: %v %+v, %v; want off, floor 5, increase 50", c.HostLimiter, c.HostLimiterConfig, err)
	}
	for _, bad := range [][]string{{"--host-limiter", "maybe"}, {"--host-limiter-config", `{"decrease": 3}`},
		{"--host-limiter-config", `{"nope": 1}`}} {
		if _, err := parseArgs(t, bad, nil); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
