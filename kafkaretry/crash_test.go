package kafkaretry_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

// The crash test's child process is this test binary run again with
// crashChildEnv set; it reads its settings from these variables.
const (
	crashChildEnv   = "KAFKARETRY_CRASH_CHILD" // "txn" or "off": the child's Config.Transactions
	crashBrokersEnv = "KAFKARETRY_CRASH_BROKERS"
	crashJournalEnv = "KAFKARETRY_CRASH_JOURNAL"
	crashTrialsEnv  = "KAFKARETRY_KILL_TRIALS" // trials per mode; 20 unless set
	crashGroup      = "crash"
	crashAttempts   = 3
)

// TestCrashChild is not a test: it is the consumer that TestKill9 starts
// and kills, skipped unless crashChildEnv is set. It handles records with
// a Processor until interrupted, appending each handling to the journal
// file as "key topic attempt result" before returning from the Handler.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(crashChildEnv)
	if mode == "" {
		t.Skip("the consumer process of TestKill9")
	}
	journal, err := os.OpenFile(os.Getenv(crashJournalEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer journal.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	txn := kafkaretry.TxnOff
	if mode == "txn" {
		txn = kafkaretry.TxnOn
	}
	p, err := kafkaretry.New(crashConfig(txn, strings.Split(os.Getenv(crashBrokersEnv), ","),
		func(_ context.Context, r *kgo.Record) error {
			time.Sleep(5 * time.Millisecond) // the work
			key := string(r.Key)
			var herr error
			switch {
			case strings.Contains(key, "-bad-"):
				herr = errFlaky
			case strings.Contains(key, "-flaky-") && r.Topic == topic:
				herr = errFlaky
			}
			result := "ok"
			if herr != nil {
				result = "fail"
			}
			attempt := header(r, kafkaretry.HeaderRetryAttempt)
			if attempt == "" {
				attempt = "0"
			}
			// One write of a short line to an O_APPEND file: whole, even
			// when the process is killed around it.
			if _, err := fmt.Fprintf(journal, "%s %s %s %s\n", key, r.Topic, attempt, result); err != nil {
				return err
			}
			return herr
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// crashConfig is the child's Config: a stable transactional ID and a
// static group member ID, so that a restarted child fences the transaction
// its killed predecessor left open and takes its partitions back at once,
// and short group timeouts.
func crashConfig(txn kafkaretry.TxnMode, brokers []string, h kafkaretry.Handler) kafkaretry.Config {
	return kafkaretry.Config{
		Topic: topic, Group: crashGroup, Handler: h,
		Policy: retry.Policy{MaxAttempts: crashAttempts,
			Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 50 * time.Millisecond, Jitter: backoff.NoJitter}},
		Transactions: txn, TransactionalID: "crash-child", TransactionTimeout: 5 * time.Second,
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 2 * time.Second,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.InstanceID("crash-child")},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// TestKill9 kills the consumer process with SIGKILL at random points while
// it handles records, trials times, then lets a last one finish, and counts
// what reached the retry and dead-letter topics. Each trial produces 12
// records (6 that succeed, 3 that fail once, 3 that always fail and end in
// the DLQ after 3 attempts), waits until the child has handled one of
// them, and kills it 0–300 ms later. With transactions there must be no
// duplicate retry or DLQ record and no lost record; without them no lost
// record, and at most one duplicate chain per consumer (main and retry) per
// kill: the record in flight. Both counts are logged.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops its child with os.Interrupt")
	}
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	trials := 20
	if n, err := strconv.Atoi(os.Getenv(crashTrialsEnv)); err == nil && n > 0 {
		trials = n
	}
	for _, mode := range []string{"txn", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			killTrials(t, mode, trials, rand.New(rand.NewPCG(seed, 18)))
		})
	}
}

func killTrials(t *testing.T, mode string, trials int, rng *rand.Rand) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			t.Logf("children's stderr (last 4 KiB):\n%s", b[max(0, len(b)-4096):])
		}
	}()
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+mode,
			crashBrokersEnv+"="+strings.Join(c.ListenAddrs(), ","), crashJournalEnv+"="+journal)
		cmd.Stdout, cmd.Stderr = io.Discard, stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	var keys []string
	kills := 0
	var takeover time.Duration // the longest from a child's start to its first handling
	for trial := range trials {
		var batch []*kgo.Record
		for i := range 12 {
			kind := "good"
			switch {
			case i >= 9:
				kind = "bad"
			case i >= 6:
				kind = "flaky"
			}
			key := fmt.Sprintf("t%02d-%s-%02d", trial, kind, i)
			keys = append(keys, key)
			batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(key)})
		}
		e.produce(t, batch...)
		before := len(readJournal(t, journal))
		started := time.Now()
		child := start()
		waitFor(t, "the child to handle a record", func() bool { return len(readJournal(t, journal)) > before })
		// The takeover: a new process, its group joins, the transaction
		// its killed predecessor left open fenced, and a record handled.
		takeover = max(takeover, time.Since(started))
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait() // killed: its error says so
		kills++
	}

	// A last child finishes the work and is stopped gracefully.
	child := start()
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	dlq := kafkaretry.DLQTopic(topic)
	waitFor(t, "every record settled", func() bool {
		ok := succeeded(readJournal(t, journal))
		dead := map[string]bool{}
		for _, r := range e.records(t, dlq) {
			dead[string(r.Key)] = true
		}
		for _, k := range keys {
			if strings.Contains(k, "-bad-") && !dead[k] || !strings.Contains(k, "-bad-") && !ok[k] {
				return false
			}
		}
		return true
	})
	if err := child.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// "signal: interrupt" is a child interrupted before it listened for
	// the signal: everything had settled before it started.
	if err := child.Wait(); err != nil && err.Error() != "signal: interrupt" {
		t.Errorf("the last child: %v", err)
	}

	// What Kafka holds: copies per (key, attempt) in the retry topic and
	// per key in the DLQ; every copy of a key has one identity.
	retryCopies, dlqCopies := map[string]int{}, map[string]int{}
	ids := map[string]map[string]bool{}
	note := func(r *kgo.Record) {
		k := string(r.Key)
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		ids[k][header(r, kafkaretry.HeaderRecordID)] = true
	}
	for _, r := range e.records(t, kafkaretry.RetryTopic(topic, 0)) {
		retryCopies[string(r.Key)+" "+header(r, kafkaretry.HeaderRetryAttempt)]++
		note(r)
	}
	for _, r := range e.records(t, dlq) {
		dlqCopies[string(r.Key)]++
		note(r)
	}
	dupRetry, dupDLQ := 0, 0
	for _, n := range retryCopies {
		dupRetry += n - 1
	}
	for k, n := range dlqCopies {
		dupDLQ += n - 1
		if !strings.Contains(k, "-bad-") {
			t.Errorf("%s dead-lettered", k)
		}
	}
	for k, set := range ids {
		if len(set) != 1 {
			t.Errorf("%s: copies with %d identities %v, want 1", k, len(set), set)
		}
	}
	// The journal: handlings beyond the first of each (key, topic, attempt)
	// are the ones a crash made run again.
	lines := readJournal(t, journal)
	seen, reruns := map[string]bool{}, 0
	for _, l := range lines {
		f := strings.Fields(l)
		id := strings.Join(f[:3], " ")
		if seen[id] {
			reruns++
		}
		seen[id] = true
	}
	lost := 0
	ok := succeeded(lines)
	for _, k := range keys {
		if strings.Contains(k, "-bad-") && dlqCopies[k] == 0 || !strings.Contains(k, "-bad-") && !ok[k] {
			lost++
		}
	}
	t.Logf("kill -9 (%s): %d kills, %d records; %d handler calls, %d of them re-runs; duplicate retry records %d, duplicate DLQ records %d; lost %d; takeover at most %v",
		map[string]string{"txn": "transactions", "off": "no transactions"}[mode], kills, len(keys), len(lines), reruns, dupRetry, dupDLQ, lost,
		takeover.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d records lost", lost)
	}
	if mode == "txn" && (dupRetry != 0 || dupDLQ != 0) {
		t.Errorf("with transactions: %d duplicate retry and %d duplicate DLQ records, want none", dupRetry, dupDLQ)
	}
	// Without transactions a kill can re-run the record in flight in each
	// of the two consumers; a record forwarded twice starts a second chain,
	// which can copy each of its later forwards once more.
	if mode == "off" && (dupDLQ > 2*kills || dupRetry > 2*kills*(crashAttempts-1)) {
		t.Errorf("without transactions: %d duplicate retry and %d duplicate DLQ records after %d kills, want at most %d and %d",
			dupRetry, dupDLQ, kills, 2*kills*(crashAttempts-1), 2*kills)
	}
}

// readJournal returns the journal's lines.
func readJournal(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if len(strings.Fields(sc.Text())) == 4 {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// succeeded returns the keys with a successful handling in lines.
func succeeded(lines []string) map[string]bool {
	ok := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); f[3] == "ok" {
			ok[f[0]] = true
		}
	}
	return ok
}
