//go:build !linux

package main

// freeDisk reports no free space where the platform's statfs is not wired up.
func freeDisk(string) (int64, bool) { return 0, false }
