package redistest

import (
	"errors"
	"fmt"
)

// Masters is a set of independent standalone masters, for example for
// algorithms that spread a lock over several Redis instances.
type Masters []*Server

// StartMasters starts k independent masters with default options.
func StartMasters(k int) (Masters, error) {
	if k < 1 {
		return nil, fmt.Errorf("redistest: StartMasters needs at least one master, got %d", k)
	}
	m := make(Masters, 0, k)
	for range k {
		s, err := Start(Options{})
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		m = append(m, s)
	}
	return m, nil
}

// Addrs returns the addresses of the masters.
func (m Masters) Addrs() []string {
	addrs := make([]string, len(m))
	for i, s := range m {
		addrs[i] = s.Addr
	}
	return addrs
}

// Close closes every master.
func (m Masters) Close() error {
	return closeAll(m)
}

// closeAll closes servers and joins their errors.
func closeAll(servers []*Server) error {
	var errs []error
	for _, s := range servers {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
