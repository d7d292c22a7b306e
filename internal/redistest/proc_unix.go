//go:build unix

package redistest

import (
	"errors"
	"syscall"
)

const processControlSupported = true

type signal int

const (
	sigKill signal = iota
	sigStop
	sigCont
)

// signalGroup sends sig to the process group led by pid. A group that is
// already gone is not an error.
func signalGroup(pid int, sig signal) error {
	var s syscall.Signal
	switch sig {
	case sigKill:
		s = syscall.SIGKILL
	case sigStop:
		s = syscall.SIGSTOP
	case sigCont:
		s = syscall.SIGCONT
	}
	err := syscall.Kill(-pid, s)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
