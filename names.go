package relock

import (
	"fmt"
	"strings"
)

// The keys and channels made from a name are internal/layout's, the one
// place that names them (docs/design.md, Keys).

// MaxNameLen is the longest name relock accepts, in bytes, for every
// primitive: the name the caller gives, not the keys made from it.
const MaxNameLen = 1024

// checkName reports whether name can be used as a lock name on any
// topology: not empty, at most MaxNameLen bytes, and either free of braces
// or carrying a proper hash tag, so that the lock and its companion keys
// always hash to one cluster slot.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidName, len(name), MaxNameLen)
	}
	open := strings.IndexByte(name, '{')
	if open < 0 {
		if strings.IndexByte(name, '}') >= 0 {
			return fmt.Errorf("%w: %q has '}' without '{': its companion keys would hash to another cluster slot", ErrInvalidName, name)
		}
		return nil
	}
	if end := strings.IndexByte(name[open+1:], '}'); end <= 0 {
		return fmt.Errorf("%w: %q has no non-empty {hash tag}: its companion keys would hash to another cluster slot", ErrInvalidName, name)
	}
	return nil
}
