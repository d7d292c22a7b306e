//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts the child in its own process group so the whole group can
// be signalled at once.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
