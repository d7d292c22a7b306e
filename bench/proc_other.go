//go:build !linux

package main

import (
	"syscall"
	"time"
)

// sysProcAttr returns nil: only Linux can tie redis-server's life to ours.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// processCPU returns 0: the bench reads its CPU time on Linux only.
func processCPU() time.Duration { return 0 }
