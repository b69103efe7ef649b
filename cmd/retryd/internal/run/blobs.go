package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/blob/s3"
)

// BlobConfig is what the blob flags say: where large bodies go, and which
// bodies callers may give by reference.
type BlobConfig struct {
	// Blobs is --blobs: "" (the default for the store), "off", "local",
	// "local:DIR", a directory, or s3://bucket/prefix?endpoint=…&region=….
	Blobs         string
	BlobThreshold int64    // --blob-threshold; 0 means api.DefaultBlobThreshold
	MaxBody       int64    // --max-body; 0 means api.DefaultMaxLargeBodyBytes
	AllowBodyRefs []string // --allow-body-refs
}

// blobFlags defines the blob flags.
func blobFlags(fs *flag.FlagSet, c *BlobConfig) {
	fs.StringVar(&c.Blobs, "blobs", "",
		"the blob store, which keeps the task bodies over --blob-threshold and reads bodyRefs: a `place`, "+
			"s3://bucket/prefix?endpoint=…&region=… (any S3-compatible server; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), "+
			"a directory for the embedded blob store, or off. "+
			"Default: the embedded store beside an SQLite store (./retryd.blobs/ beside ./retryd.db); none with PostgreSQL or Redis, "+
			"whose instances must share their blobs: a directory is refused there unless written local:DIR (or local, ./retryd.blobs), "+
			"which says that this is the only instance")
	fs.Var(byteSize{&c.BlobThreshold}, "blob-threshold",
		"with a blob store, a body given inline over this `size` (bytes, or 64KiB, 1MiB; at most 1MiB) is kept there and the task holds its reference (default 64KiB)")
	fs.Var(byteSize{&c.MaxBody}, "max-body",
		"with a blob store, the largest POST /retry-tasks request (`size`, as --blob-threshold); its body streams to the blob store as it arrives (default 64MiB)")
	fs.Var(stringList{&c.AllowBodyRefs}, "allow-body-refs",
		"without --tokens-file: the s3://bucket/prefix/ places (comma-separated, each ending in /) the tasks' bodyRefs may name; "+
			"none by default, since retryd reads them with its own credentials and sends them where the task says. "+
			"With --tokens-file, list each tenant's after it in the file. Needs --blobs s3://…")
}

// byteSize is a size flag: bytes, or a number with B, K/KiB, M/MiB or
// G/GiB (powers of 1024).
type byteSize struct{ p *int64 }

func (v byteSize) String() string {
	if v.p == nil || *v.p == 0 {
		return "" // no "(default 0)": the usage says what 0 means
	}
	switch n := *v.p; {
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	default:
		return strconv.FormatInt(n, 10)
	}
}

func (v byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	i := len(t) - len(strings.TrimLeft(t, "0123456789"))
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	shift := -1
	switch unit {
	case "", "b":
		shift = 0
	case "k", "kib":
		shift = 10
	case "m", "mib":
		shift = 20
	case "g", "gib":
		shift = 30
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || shift < 0 || n <= 0 || n > (1<<40)>>shift {
		return fmt.Errorf("%q is not a size: want bytes, or a number with KiB, MiB or GiB (64KiB), above 0", s)
	}
	*v.p = n << shift
	return nil
}

// stringList is a repeatable flag of comma-separated values.
type stringList struct{ p *[]string }

func (v stringList) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v stringList) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*v.p = append(*v.p, part)
		}
	}
	return nil
}

// blobPlan is what --blobs comes to for a kind of store, decided before
// anything is opened.
type blobPlan struct {
	kind   string // "off", "disk" or "s3"
	dir    string // disk: the directory
	s3     string // s3: the URL
	single bool   // disk on a shared store: the operator said this is the only instance
}

// planBlobs reads the blob flags for the store kind ("sqlite", "postgres",
// "redis") and store spec, and refuses what cannot work: an embedded
// blob store under instances that share a store, limits without a blob
// store, bodyRef allow-lists that nothing could read.
//
// Several retryd instances on one PostgreSQL or Redis store claim each
// other's tasks, so each must read the blobs every other put: only an S3
// blob store is shared. retryd cannot tell whether it is alone on such a
// store (instances come and go), so an embedded blob store there is the
// operator's explicit word, local or local:DIR, and a plain directory is
// refused; without --blobs such a store keeps bodies inline (up to 1 MiB),
// as before blob stores existed. SQLite is one process's (its file is
// locked), so the embedded store beside it is the default.
func planBlobs(c Config, kind string) (blobPlan, error) {
	shared := kind == "postgres" || kind == "redis"
	spec := c.Blobs
	var p blobPlan
	switch {
	case spec == "off" || spec == "" && shared:
		p.kind = "off"
	case spec == "":
		p = blobPlan{kind: "disk", dir: defaultBlobDir(c.Store)}
	case spec == "local":
		p = blobPlan{kind: "disk", dir: defaultBlobDir(c.Store), single: shared}
	case strings.HasPrefix(spec, "local:"):
		p = blobPlan{kind: "disk", dir: strings.TrimPrefix(spec, "local:"), single: shared}
		if p.dir == "" {
			return p, usageError{errors.New("--blobs local:DIR: no directory")}
		}
	case strings.HasPrefix(spec, "s3://"):
		p = blobPlan{kind: "s3", s3: spec}
	case strings.Contains(spec, "://"):
		scheme, _, _ := strings.Cut(spec, "://")
		return p, usageError{fmt.Errorf("--blobs %s://…: unknown kind; give s3://bucket/prefix, a directory, local[:DIR] or off", scheme)}
	case shared:
		return p, usageError{fmt.Errorf("--blobs %s: the embedded blob store is this machine's alone, and retryd instances sharing a %s store "+
			"must share their blobs (each may attempt a task another created): give --blobs s3://bucket/prefix?endpoint=…&region=…, "+
			"or --blobs local:%s to say that this instance is the only one", spec, kind, spec)}
	default:
		p = blobPlan{kind: "disk", dir: spec}
	}

	var errs []string
	if p.kind == "off" {
		why := "--blobs off"
		if spec == "" {
			why = fmt.Sprintf("a %s store has no blob store unless --blobs gives a shared one (s3://…) or local[:DIR]", kind)
		}
		for name, set := range map[string]bool{"--blob-threshold": c.BlobThreshold != 0, "--max-body": c.MaxBody != 0,
			"--allow-body-refs": len(c.AllowBodyRefs) > 0} {
			if set {
				errs = append(errs, name)
			}
		}
		if len(errs) > 0 {
			slices.Sort(errs)
			return p, usageError{fmt.Errorf("%s: need a blob store, and %s", strings.Join(errs, ", "), why)}
		}
	}
	if c.BlobThreshold > api.DefaultMaxBodyBytes {
		return p, usageError{fmt.Errorf("--blob-threshold %s: at most 1MiB, the most a task's row holds", byteSize{&c.BlobThreshold})}
	}
	if len(c.AllowBodyRefs) > 0 {
		if c.TokensFile != "" {
			return p, usageError{errors.New("--allow-body-refs is for authentication off: with --tokens-file, list each tenant's s3://bucket/prefix/ after it in the file")}
		}
		if p.kind != "s3" {
			return p, usageError{errors.New("--allow-body-refs needs --blobs s3://…: bodies by reference are read from S3, which the embedded blob store cannot")}
		}
		for _, r := range c.AllowBodyRefs {
			if err := api.ParseBodyRefPrefix(r); err != nil {
				return p, usageError{fmt.Errorf("--allow-body-refs: %w", err)}
			}
		}
	}
	return p, nil
}

// storeKindOf is storeKind's kind of spec, "" for none it knows (which
// openStore refuses).
func storeKindOf(spec string) string {
	k, _ := storeKind(spec)
	return k
}

// defaultBlobDir is the embedded blob store's directory beside the SQLite
// file of store: ./retryd.blobs beside ./retryd.db; ./retryd.blobs for a
// store that is no file.
func defaultBlobDir(store string) string {
	if storeKindOf(store) != "sqlite" {
		return "./retryd.blobs"
	}
	path := strings.TrimPrefix(strings.TrimPrefix(store, "sqlite://"), "file:")
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".blobs"
}

// openBlobs opens the blob store p names (nil for off), and checks that the
// tokens' bodyRef allow-lists can be honoured. where is for the logs.
func openBlobs(ctx context.Context, p blobPlan, tokens *api.Tokens, log *slog.Logger) (b blob.Store, where string, err error) {
	if tokens.HasBodyRefs() && p.kind != "s3" {
		return nil, "", usageError{errors.New("--tokens-file gives tenants bodyRef prefixes, which need --blobs s3://…: " +
			"bodies by reference are read from S3, which the embedded blob store cannot")}
	}
	switch p.kind {
	case "off":
		return nil, "off", nil
	case "s3":
		st, err := s3.Open(ctx, p.s3)
		if err != nil {
			return nil, "", fmt.Errorf("--blobs: %w", err)
		}
		return st, p.s3, nil
	}
	dir := p.dir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	st, err := disk.Open(dir)
	if err != nil {
		return nil, "", fmt.Errorf("--blobs: %w", err)
	}
	if p.single {
		log.Warn("the embedded blob store on a shared store: run no other retryd instance on this store, "+
			"or each will lack the bodies the others keep (--blobs s3://… is shared)", "blobs", dir)
	}
	return st, dir, nil
}
