//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package cli

// terminalReachesChild reports false where relock cannot tell: every
// signal relock catches is passed on to its command.
func terminalReachesChild() bool { return false }
