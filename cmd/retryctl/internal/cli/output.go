package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrykit/retry/client"
)

// when renders an epoch-millisecond time in local time, "-" for none.
func when(m client.Millis) string {
	if m == 0 {
		return "-"
	}
	return m.Time().Local().Format("2006-01-02 15:04:05.000")
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *runner) table() *tabwriter.Writer {
	return tabwriter.NewWriter(r.env.Stdout, 0, 0, 2, ' ', 0)
}

// printTask writes one task as "field: value" lines.
func (r *runner) printTask(t *client.Task) error {
	w := r.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("Task", t.TaskID)
	row("Status", string(t.Status))
	row("Attempts", strconv.Itoa(t.AttemptNumber))
	row("Policy", t.PolicyID)
	row("Request", t.Method+" "+taskTarget(t))
	if t.DestinationID != "" {
		row("Destination", t.DestinationID)
		row("Path", orDash(t.Path))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		row("Header", name+": "+t.Headers[name])
	}
	switch {
	case t.BodyRef != "" && t.BodySize > 0:
		row("Body", fmt.Sprintf("%d bytes, by reference: %s", t.BodySize, t.BodyRef))
	case t.BodyRef != "":
		row("Body", "by reference: "+t.BodyRef)
	case t.BodyBase64 != nil:
		row("Body", fmt.Sprintf("%d bytes (binary)", len(t.BodyBase64)))
	case t.Body != "":
		row("Body", fmt.Sprintf("%d bytes", len(t.Body)))
	}
	row("Idempotency key", t.IdempotencyKey)
	row("Created", when(t.CreatedAt))
	row("Next attempt", when(t.NextAttemptAt))
	row("Finished", when(t.FinishedAt))
	if t.LastResponseStatus != 0 {
		row("Last status", strconv.Itoa(t.LastResponseStatus))
	}
	row("Last error", orDash(t.LastError))
	if t.Cause != "" {
		row("Cause", t.Cause)
	}
	return w.Flush()
}

func (r *runner) printTasks(page *client.Page[client.Task]) error {
	w := r.table()
	fmt.Fprintln(w, "TASK\tSTATUS\tATTEMPTS\tPOLICY\tNEXT ATTEMPT\tREQUEST\tLAST ERROR")
	for _, t := range page.Items {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s %s\t%s\n", t.TaskID, t.Status, t.AttemptNumber, t.PolicyID,
			when(t.NextAttemptAt), t.Method, taskTarget(&t), orDash(clip(t.LastError, 60)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.printNext(page.NextPageToken)
}

// taskTarget is where a task goes: its URL, or for a task of a
// destination "[id]" and its path, the destination's URL being read at
// each attempt.
func taskTarget(t *client.Task) string {
	if t.DestinationID != "" {
		return "[" + t.DestinationID + "]" + t.Path
	}
	return t.TargetURL
}

func (r *runner) printAttempts(page *client.Page[client.Attempt]) error {
	w := r.table()
	fmt.Fprintln(w, "#\tSTARTED\tDURATION\tSTATUS\tERROR")
	for _, a := range page.Items {
		status := "-"
		if a.ResponseStatus != 0 {
			status = strconv.Itoa(a.ResponseStatus)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", a.AttemptNumber, when(a.StartedAt),
			ms(a.DurationMs), status, orDash(clip(a.ErrorMessage, 80)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.printNext(page.NextPageToken)
}

func (r *runner) printPolicy(p *client.Policy) error {
	w := r.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	s := p.Settings
	if p.Builtin {
		row("Policy", p.ID+" (built in: the policy of tasks that name none)")
	} else {
		row("Policy", p.ID)
	}
	row("Backoff", s.Backoff.Kind.String())
	row("Initial delay", initialDelay(s.Backoff.Base))
	row("Max delay", maxDelay(s.Backoff.Max))
	row("Jitter", s.Backoff.Jitter.String())
	row("Max attempts", strconv.Itoa(s.Attempts()))
	row("Budget", budget(s.Budget))
	row("Retryable statuses", codes(s.RetryableStatusCodes))
	return w.Flush()
}

func (r *runner) printPolicies(page *client.Page[client.Policy]) error {
	w := r.table()
	fmt.Fprintln(w, "POLICY\tBACKOFF\tINITIAL\tMAX DELAY\tJITTER\tATTEMPTS\tBUDGET\tRETRYABLE")
	for _, p := range page.Items {
		s := p.Settings
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.ID, s.Backoff.Kind, initialDelay(s.Backoff.Base), maxDelay(s.Backoff.Max),
			s.Backoff.Jitter, s.Attempts(), budget(s.Budget), codes(s.RetryableStatusCodes))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.printNext(page.NextPageToken)
}

// printDestination writes one destination as "field: value" lines. Its
// secrets show as set, never as values: retryd does not answer them.
func (r *runner) printDestination(d *client.Destination) error {
	w := r.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("Destination", d.ID)
	row("URL", d.URL)
	status := string(d.Status)
	if d.StatusSince != 0 {
		status += " since " + when(d.StatusSince)
	}
	if d.StatusReason != "" {
		status += ": " + d.StatusReason
	}
	row("Status", status)
	row("Auth", authSummary(d.Auth))
	for _, name := range slices.Sorted(maps.Keys(d.Headers)) {
		row("Header", name+": "+d.Headers[name].String())
	}
	if sg := d.Signing; sg != nil {
		row("Signing", sg.Scheme+", secret "+setOrNot(sg.Secret))
		for _, p := range sg.Previous {
			row("Previous secret", "signs until "+when(p.Until))
		}
	} else {
		row("Signing", "none")
	}
	row("Rate limit", rateSummary(d.RateLimit))
	if d.MaxInFlight > 0 {
		row("Max in flight", strconv.Itoa(d.MaxInFlight))
	} else {
		row("Max in flight", "no cap")
	}
	if d.TimeoutMs > 0 {
		row("Timeout", ms(d.TimeoutMs))
	} else {
		row("Timeout", "retryd's default")
	}
	if t := d.TLS; t != nil {
		var parts []string
		if t.CACertPEM != "" {
			parts = append(parts, "own CA")
		}
		if t.ClientCertPEM != "" {
			parts = append(parts, "client certificate, key "+setOrNot(t.ClientKeyPEM))
		}
		row("TLS", orDash(strings.Join(parts, "; ")))
	}
	if a := d.AutoDisable; a != nil {
		row("Auto-disable", "after failing for "+ms(a.AfterMs))
	} else {
		row("Auto-disable", "never")
	}
	row("Failing since", when(d.FailingSince))
	row("Version", strconv.FormatInt(d.Version, 10))
	row("Created", when(d.CreatedAt))
	row("Updated", when(d.UpdatedAt))
	return w.Flush()
}

func (r *runner) printDestinations(page *client.Page[client.Destination]) error {
	w := r.table()
	fmt.Fprintln(w, "DESTINATION\tSTATUS\tURL\tAUTH\tSIGNING\tRATE LIMIT\tIN FLIGHT\tVERSION\tUPDATED")
	for _, d := range page.Items {
		auth, signing, inFlight := "none", "none", "no cap"
		if d.Auth != nil {
			auth = d.Auth.Type
		}
		if d.Signing != nil {
			signing = d.Signing.Scheme
		}
		if d.MaxInFlight > 0 {
			inFlight = strconv.Itoa(d.MaxInFlight)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.ID, d.Status, clip(d.URL, 60), auth, signing,
			rateSummary(d.RateLimit), inFlight, d.Version, when(d.UpdatedAt))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.printNext(page.NextPageToken)
}

// authSummary says how a destination authenticates, its secrets as set or
// not.
func authSummary(a *client.DestinationAuth) string {
	if a == nil {
		return "none"
	}
	switch a.Type {
	case client.AuthBearer:
		return "bearer, token " + setOrNot(a.Token)
	case client.AuthBasic:
		return "basic, user " + a.Username + ", password " + setOrNot(a.Password)
	case client.AuthHeader:
		return "header " + a.Name + ", value " + setOrNot(a.Value)
	case client.AuthOAuth2ClientCredentials:
		s := "OAuth2 client credentials, client " + a.ClientID + " at " + a.TokenURL + ", secret " + setOrNot(a.ClientSecret)
		if len(a.Scopes) > 0 {
			s += ", scopes " + strings.Join(a.Scopes, " ")
		}
		if a.Audience != "" {
			s += ", audience " + a.Audience
		}
		return s
	}
	return a.Type
}

func setOrNot(s client.Secret) string {
	if s.IsZero() {
		return "not set"
	}
	return "set"
}

func rateSummary(rl *client.RateLimit) string {
	if rl == nil {
		return "none"
	}
	s := strconv.FormatFloat(rl.PerSecond, 'f', -1, 64) + "/s"
	if rl.Burst > 0 {
		s += ", burst " + strconv.Itoa(rl.Burst)
	}
	return s
}

func (r *runner) printNext(token string) error {
	if token == "" {
		return nil
	}
	_, err := fmt.Fprintf(r.env.Stdout, "more: --page-token %s\n", token)
	return err
}

// initialDelay prints a backoff's Base; backoff.None (any negative) is no delay.
func initialDelay(d time.Duration) string {
	return max(d, 0).String()
}

// maxDelay prints a backoff's Max; backoff.None (any negative) is no cap.
func maxDelay(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.String()
}

func budget(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

func codes(cs []int) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// human renders milliseconds as a person reads a wait: 850ms, 1.2s, 42s,
// 4m10s, 2h5m, 3d4h; rounded, for a table of percentiles is no place for
// nanoseconds.
func human(msec float64) string {
	d := time.Duration(msec * float64(time.Millisecond))
	// Each unit is chosen by the value rounded to it, so that 59.6s is 1m,
	// not 60s.
	if d < 0 {
		return "-"
	}
	if r := d.Round(time.Millisecond); r < time.Second {
		return fmt.Sprintf("%dms", r.Milliseconds())
	}
	if r := d.Round(100 * time.Millisecond); r < 10*time.Second {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", r.Seconds()), ".0") + "s"
	}
	if r := d.Round(time.Second); r < time.Minute {
		return fmt.Sprintf("%ds", int(r.Seconds()))
	} else if r < time.Hour {
		return pair(r, time.Minute, "m", time.Second, "s")
	}
	if r := d.Round(time.Minute); r < 24*time.Hour {
		return pair(r, time.Hour, "h", time.Minute, "m")
	}
	return pair(d.Round(time.Hour), 24*time.Hour, "d", time.Hour, "h")
}

// pair writes d in two units, big and small ("4m10s"), leaving out a small
// part of 0 ("4m").
func pair(d, big time.Duration, bigName string, small time.Duration, smallName string) string {
	s := fmt.Sprintf("%d%s", d/big, bigName)
	if rest := (d % big) / small; rest > 0 {
		s += fmt.Sprintf("%d%s", rest, smallName)
	}
	return s
}
