package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// ServerEnv is the environment variable that chooses the server the tests
// run on: "redis" (the default when it is empty) or "valkey".
const ServerEnv = "RELOCK_TEST_SERVER"

// programs names the binaries of one server and the command that installs
// them on Debian.
type programs struct {
	name     string // the value of ServerEnv that chooses these programs
	server   string // also runs a sentinel when given --sentinel
	sentinel string // server --sentinel stands in for it when it is missing
	cli      string // creates clusters
	install  string // installs server and cli
}

// servers lists the servers the tests can run on. This is the one place
// that names their binaries.
var servers = []programs{
	{
		name:     "redis",
		server:   "redis-server",
		sentinel: "redis-sentinel",
		cli:      "redis-cli",
		install:  "sudo apt-get install -y redis-server redis-sentinel redis-tools",
	},
	{
		name:     "valkey",
		server:   "valkey-server",
		sentinel: "valkey-sentinel",
		cli:      "valkey-cli",
		// Debian 12 ships Valkey in its backports only.
		install: "sudo apt-get install -y -t bookworm-backports valkey-server valkey-tools",
	},
}

// chosen returns the programs of the server that ServerEnv names, Redis's
// when it is empty. An unknown name is an error, so that a typo does not
// quietly run the tests on Redis.
func chosen() (programs, error) {
	name := os.Getenv(ServerEnv)
	if name == "" {
		return servers[0], nil
	}
	for _, p := range servers {
		if p.name == name {
			return p, nil
		}
	}
	return programs{}, fmt.Errorf("redistest: %s=%q names no server this package knows; use redis or valkey", ServerEnv, name)
}

// ErrNoRedis is matched (with errors.Is) by the error returned when a
// binary of the chosen server is not on PATH.
var ErrNoRedis = errors.New("server binaries not found")

// errUnsupported is returned on platforms without Unix process control.
var errUnsupported = errors.New("redistest: starting redis processes is only supported on Unix")

// missingBinaryError reports a binary of the chosen server that is not on
// PATH.
type missingBinaryError struct {
	name    string
	install string
}

func (e *missingBinaryError) Error() string {
	return e.name + " not found: install it with: " + e.install
}

func (e *missingBinaryError) Is(target error) bool { return target == ErrNoRedis }

// Require reports whether the chosen server can be started. The error, if
// any, includes the command that installs it and matches ErrNoRedis.
func Require() error {
	_, err := require(false)
	return err
}

// RequireCluster is like Require but also checks for the command-line
// client, which StartCluster uses to create the cluster.
func RequireCluster() error {
	_, err := require(true)
	return err
}

// require returns the chosen server's programs once the ones needed are
// found on PATH.
func require(cli bool) (programs, error) {
	if !processControlSupported {
		return programs{}, errUnsupported
	}
	p, err := chosen()
	if err != nil {
		return programs{}, err
	}
	names := []string{p.server}
	if cli {
		names = append(names, p.cli)
	}
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			return programs{}, &missingBinaryError{name: name, install: p.install}
		}
	}
	return p, nil
}

// sentinelCommand returns the program and leading arguments that start a
// sentinel of p with the configuration file conf.
func (p programs) sentinelCommand(conf string) (string, []string) {
	if _, err := exec.LookPath(p.sentinel); err == nil {
		return p.sentinel, []string{conf}
	}
	return p.server, []string{conf, "--sentinel"}
}
