//go:build !linux

package cli

import "syscall"

// childAttr returns the process attributes of relock run's command. Only
// Linux has a parent-death signal. A process group of its own would not
// outlive relock's death either, and would cut the command off the
// terminal (^C would no longer reach it, reading it would stop it), so the
// command stays in relock's group: a relock killed by SIGKILL leaves it
// running, as relock run's help says.
func childAttr() *syscall.SysProcAttr { return nil }
