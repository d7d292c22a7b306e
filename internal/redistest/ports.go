package redistest

import (
	"errors"
	"net"
	"strconv"
	"sync"
)

// clusterBusOffset is the distance between a cluster node's client port and
// its cluster bus port.
const clusterBusOffset = 10000

// maxClusterPort keeps the cluster bus port (port+10000) a valid port.
const maxClusterPort = 65535 - clusterBusOffset

// reserved holds the ports owned by servers of this process, including the
// ports of servers that are currently killed and may be restarted, and the
// bus ports of cluster nodes.
var reserved = struct {
	sync.Mutex
	ports map[int]struct{}
}{ports: make(map[int]struct{})}

// reservePort picks a port on 127.0.0.1 that nothing listens on and that no
// other server of this process owns, and reserves it. With bus set, the port
// is below maxClusterPort and port+10000 is free and reserved too.
func reservePort(bus bool) (int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	for range 200 {
		port, err := kernelFreePort()
		if err != nil {
			return 0, err
		}
		if _, taken := reserved.ports[port]; taken {
			continue
		}
		if bus {
			if port >= maxClusterPort {
				continue
			}
			if _, taken := reserved.ports[port+clusterBusOffset]; taken {
				continue
			}
			if !portFree(port + clusterBusOffset) {
				continue
			}
			reserved.ports[port+clusterBusOffset] = struct{}{}
		}
		reserved.ports[port] = struct{}{}
		return port, nil
	}
	return 0, errors.New("redistest: no free loopback port found")
}

// releasePort gives back a port taken with reservePort.
func releasePort(port int, bus bool) {
	reserved.Lock()
	defer reserved.Unlock()
	delete(reserved.ports, port)
	if bus {
		delete(reserved.ports, port+clusterBusOffset)
	}
}

// kernelFreePort asks the kernel for an unused port by listening on port 0.
func kernelFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// portFree reports whether a listener can be bound to 127.0.0.1:port.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
