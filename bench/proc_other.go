//go:build !linux

package main

import "syscall"

// sysProcAttr returns nil: only Linux can tie redis-server's life to ours.
func sysProcAttr() *syscall.SysProcAttr { return nil }
