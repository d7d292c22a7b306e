//go:build linux

package redistest

import "syscall"

// sysProcAttr puts the child in its own process group, so terminal signals
// aimed at the test binary do not reach it directly and the whole group can
// be signalled at once, and asks the kernel to kill it if the test binary
// dies without cleaning up (for example on Ctrl-C).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
