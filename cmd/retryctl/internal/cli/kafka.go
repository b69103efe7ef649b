package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry/kafkaretry"
)

// kafkaReplayCommand runs "retryctl kafka replay [flags]": it
// parses args (the flags, without the command's name), connects to the
// brokers, calls Replay and writes one line about what it did to out. -h
// prints the flags to out and returns flag.ErrHelp. Flags:
//
//	-brokers host:port,…   seed brokers (default localhost:9092)
//	-topic T               the main topic; records are read from T-dlq (required)
//	-to main|retry         where to republish (default main)
//	-tiers N               the consumer's number of retry tiers (default 0)
//	-since, -until         DLQ time window: RFC 3339, or a duration meaning that long ago
//	-error-type TYPE       only records whose x-last-error-type is TYPE
//	-dry-run               count, do not produce
//	-timeout D             give up after D (default 1m)
func kafkaReplayCommand(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("retryctl kafka replay", flag.ContinueOnError)
	fs.SetOutput(out)
	brokers := fs.String("brokers", "localhost:9092", "seed brokers, comma-separated")
	to := fs.String("to", "main", "republish to the main topic (main) or the first retry topic (retry)")
	since := fs.String("since", "", "replay records dead-lettered at or after this time (RFC 3339, or a duration ago)")
	until := fs.String("until", "", "replay records dead-lettered before this time (RFC 3339, or a duration ago)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	var opts kafkaretry.ReplayOptions
	fs.StringVar(&opts.Topic, "topic", "", "the main topic T; records are read from T-dlq (required)")
	fs.IntVar(&opts.Tiers, "tiers", 0, "the consumer's number of retry tiers, to name the first retry topic")
	fs.StringVar(&opts.ErrorType, "error-type", "", "only records whose x-last-error-type is this")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "count the records without producing them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kafka replay: unexpected argument %q", fs.Arg(0))
	}
	if opts.Topic == "" {
		return errors.New("kafka replay: -topic is required")
	}
	switch *to {
	case "main":
		opts.Target = kafkaretry.ToMain
	case "retry":
		opts.Target = kafkaretry.ToRetry
	default:
		return fmt.Errorf("kafka replay: -to %q: want main or retry", *to)
	}
	now := time.Now()
	var err error
	if opts.Since, err = parseAgo(*since, now); err != nil {
		return fmt.Errorf("kafka replay: -since: %w", err)
	}
	if opts.Until, err = parseAgo(*until, now); err != nil {
		return fmt.Errorf("kafka replay: -until: %w", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka replay: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := kafkaretry.Replay(ctx, cl, opts)
	verb := "replayed"
	if opts.DryRun {
		verb = "would replay"
	}
	fmt.Fprintf(out, "%s %d of %d records from %s to %s\n", verb, res.Replayed, res.Scanned, kafkaretry.DLQTopic(opts.Topic), res.To)
	return err
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
