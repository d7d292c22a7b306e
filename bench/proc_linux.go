package main

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the benchmark dies,
// even by a panic that skips deferred cleanup.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
