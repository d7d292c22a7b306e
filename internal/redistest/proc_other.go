//go:build !unix

package redistest

import "syscall"

const processControlSupported = false

type signal int

const (
	sigKill signal = iota
	sigStop
	sigCont
)

func signalGroup(int, signal) error { return errUnsupported }

func sysProcAttr() *syscall.SysProcAttr { return nil }
