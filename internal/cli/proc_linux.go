package cli

import "syscall"

// childAttr returns the process attributes of relock run's command: on
// Linux, the kernel kills it (SIGKILL) when relock dies, however relock
// dies, so that it never runs on after the lock expires.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
