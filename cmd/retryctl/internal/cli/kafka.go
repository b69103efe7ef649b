package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry/kafkaretry"
)

// kafkaReplayFlags is "retryctl kafka replay": it connects to the brokers,
// calls Replay and writes one line about what it did, or JSON.
func kafkaReplayFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	brokers := fs.String("brokers", "localhost:9092", "seed brokers, comma-separated `H:P,…`")
	to := fs.String("to", "main", "where to republish, `main|retry`: the main topic or the first retry topic")
	since := fs.String("since", "", "replay records dead-lettered at or after this `TIME` (RFC 3339, or a duration ago)")
	until := fs.String("until", "", "replay records dead-lettered before this `TIME` (RFC 3339, or a duration ago)")
	timeout := fs.Duration("timeout", time.Minute, "give up after `D`")
	var opts kafkaretry.ReplayOptions
	fs.StringVar(&opts.Topic, "topic", "", "the main topic `T`; records are read from T-dlq (required)")
	fs.IntVar(&opts.Tiers, "tiers", 0, "the consumer's number `N` of retry tiers, to name the first retry topic")
	fs.StringVar(&opts.ErrorType, "error-type", "", "only records whose x-last-error-type is this `TYPE`")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "count the records without producing them")
	naming := fs.String("naming", "default", "the consumer's topic naming, `default|spring`: T-dlq and T-retry, or Spring Kafka's T-dlt and T-retry-0")
	fs.StringVar(&opts.From, "from", "", "read this dead-letter `TOPIC` instead of T's (one a DeadLetterTopic function chose)")
	// Its own --json: the global flags, retryd's, do not apply here.
	asJSON := fs.Bool("json", false, "print JSON instead of a line")
	return func(ctx context.Context, r *runner, _ []string) error {
		r.json = *asJSON
		switch *naming {
		case "default":
		case "spring":
			opts.Naming = kafkaretry.NamingSpring
		default:
			return fmt.Errorf("kafka replay: --naming %q: want default or spring", *naming)
		}
		return kafkaReplay(ctx, r, opts, *brokers, *to, *since, *until, *timeout)
	}
}

// kafkaReplay runs a replay the flags asked for.
func kafkaReplay(ctx context.Context, r *runner, opts kafkaretry.ReplayOptions, brokers, to, since, until string, timeout time.Duration) error {
	if opts.Topic == "" {
		return errors.New("kafka replay: --topic is required")
	}
	switch to {
	case "main":
		opts.Target = kafkaretry.ToMain
	case "retry":
		opts.Target = kafkaretry.ToRetry
	default:
		return fmt.Errorf("kafka replay: --to %q: want main or retry", to)
	}
	now := time.Now()
	var err error
	if opts.Since, err = parseAgo(since, now); err != nil {
		return fmt.Errorf("kafka replay: --since: %w", err)
	}
	if opts.Until, err = parseAgo(until, now); err != nil {
		return fmt.Errorf("kafka replay: --until: %w", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka replay: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := kafkaretry.Replay(ctx, cl, opts)
	verb := "replayed"
	if opts.DryRun {
		verb = "would replay"
	}
	if r.json {
		if jerr := r.printJSON(replayJSON{opts.DryRun, res.Scanned, res.Replayed, res.Duplicates, res.From, res.To}); jerr != nil {
			return jerr
		}
	} else {
		dups := ""
		if res.Duplicates > 0 {
			// Copies of one failure (kafkaretry.RecordID) are replayed once.
			dups = fmt.Sprintf(" (%d duplicate copies skipped)", res.Duplicates)
		}
		fmt.Fprintf(r.env.Stdout, "%s %d of %d records from %s to %s%s\n", verb, res.Replayed, res.Scanned, res.From, res.To, dups)
	}
	return err
}

// replayJSON is what "kafka replay --json" prints.
type replayJSON struct {
	DryRun     bool   `json:"dryRun"`
	Scanned    int    `json:"scanned"`
	Replayed   int    `json:"replayed"`
	Duplicates int    `json:"duplicates"`
	From       string `json:"from"`
	To         string `json:"to"`
}

// parseAgo reads a time as RFC 3339, or as a duration before now; "" is the
// zero time.
func parseAgo(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", s)
	}
	return now.Add(-d), nil
}
