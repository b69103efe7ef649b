package run

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// storeSizeLine says how many bytes an SQLite store at path takes, its
// database file and its WAL, and the embedded blob store beside it (the
// directory defaultBlobDir names), each per task of tasks.
func storeSizeLine(path string, tasks int) string {
	var db int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			db += fi.Size()
		}
	}
	var blobs, files int64
	_ = filepath.WalkDir(defaultBlobDir(path), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			blobs += fi.Size()
			files++
		}
		return nil
	})
	per := func(n int64) string {
		if tasks <= 0 {
			return "-"
		}
		return strconv.FormatInt(n/int64(tasks), 10)
	}
	return fmt.Sprintf("store at rest (after retryd stopped): database and WAL %d bytes (%s a task), blobs %d bytes in %d files (%s a task); together %s bytes a task",
		db, per(db), blobs, files, per(blobs), per(db+blobs))
}

// sizeString is n bytes, in MiB or KiB when it divides evenly.
func sizeString(n int64) string {
	if n <= 0 {
		return "a few bytes"
	}
	if s := (byteSize{&n}).String(); s != "" {
		if s == strconv.FormatInt(n, 10) {
			return s + " bytes"
		}
		return s
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// orWord is s, or word when s is empty.
func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}
