package main

import (
	"path/filepath"
	"syscall"
)

// freeDisk returns the bytes free to an unprivileged user on the file system
// of the file at path.
func freeDisk(path string) (int64, bool) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &fs); err != nil {
		return 0, false
	}
	return int64(fs.Bavail) * fs.Bsize, true
}
