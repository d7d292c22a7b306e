package redistest

import (
	"errors"
	"os/exec"
)

// InstallCommand is the command that installs the Redis binaries this
// package needs on Debian and Ubuntu.
const InstallCommand = "sudo apt-get install -y redis-server redis-sentinel redis-tools"

// ErrNoRedis is matched (with errors.Is) by the error returned when a
// required Redis binary is not on PATH.
var ErrNoRedis = errors.New("redis binaries not found")

// errUnsupported is returned on platforms without Unix process control.
var errUnsupported = errors.New("redistest: starting redis processes is only supported on Unix")

// missingBinaryError reports a Redis binary that is not on PATH.
type missingBinaryError struct {
	name string
}

func (e *missingBinaryError) Error() string {
	return e.name + " not found: install it with: " + InstallCommand
}

func (e *missingBinaryError) Is(target error) bool { return target == ErrNoRedis }

// Require reports whether redis-server can be started. The error, if any,
// includes the command that installs Redis and matches ErrNoRedis.
func Require() error {
	return requireBinaries("redis-server")
}

// RequireCluster is like Require but also checks for redis-cli, which
// StartCluster uses to create the cluster.
func RequireCluster() error {
	return requireBinaries("redis-server", "redis-cli")
}

func requireBinaries(names ...string) error {
	if !processControlSupported {
		return errUnsupported
	}
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			return &missingBinaryError{name: name}
		}
	}
	return nil
}

// sentinelCommand returns the program and leading arguments that start a
// sentinel with the configuration file conf.
func sentinelCommand(conf string) (string, []string) {
	if _, err := exec.LookPath("redis-sentinel"); err == nil {
		return "redis-sentinel", []string{conf}
	}
	return "redis-server", []string{conf, "--sentinel"}
}
