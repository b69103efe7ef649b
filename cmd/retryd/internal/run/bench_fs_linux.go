//go:build linux

package run

import (
	"fmt"
	"syscall"
)

// fileSystem names the file system dir is on, since an fsync on tmpfs
// costs nothing and SQLite's figures there would flatter it.
func fileSystem(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs (fsync costs nothing)",
		0x794c7630: "overlayfs", 0x2FC12FC1: "zfs", 0x6969: "nfs", 0x65735546: "fuse",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return " (" + n + ")"
	}
	return fmt.Sprintf(" (file system 0x%x)", st.Type)
}
