package door

import (
	"errors"
	"strings"
)

// Error is a server's error reply, its text as the server sent it. A
// driver returns every error reply as an Error, so that the classes below
// are the same whatever the client library.
type Error string

func (e Error) Error() string { return string(e) }

// Nil is the error of a nil reply (a missing key, a script's false).
const Nil = Error("redis: nil")

// ErrNoNode is returned by Driver.Master where the client cannot send to
// one server on one connection.
var ErrNoNode = errors.New("relock: the Redis client cannot address one server")

// ErrNotMaster is wrapped by the error of a call that went to a node
// found to be a replica (its WAIT answered so): a failover changed the
// slot's master. The call did not run; like a redirection, it is sent
// again, to the master found again.
var ErrNotMaster = errors.New("not the master")

// Class is what an error says of the call that got it.
type Class uint8

// The classes of errors, decided from the server's reply text.
const (
	OK          Class = iota // no error
	Transport                // not a server's reply: the call's outcome is unknown
	Other                    // a server's reply of no class below
	NilReply                 // a nil reply
	Moved                    // MOVED: the slot is served by another node
	Ask                      // ASK: the slot is moving to another node
	TryAgain                 // TRYAGAIN: the keys are moving
	ClusterDown              // CLUSTERDOWN: no master serves the slot for now
	ReadOnly                 // READONLY: the node is a replica
	NoScript                 // NOSCRIPT: the script cache lacks the script
	Auth                     // NOAUTH or WRONGPASS: credentials refused
	Busy                     // BUSY: a script runs too long
	Loading                  // LOADING: the server loads its dataset
	NoPerm                   // refused by ACL, also from inside a script
	OutOfMemory              // OOM
	WrongType                // WRONGTYPE
)

// ClassOf returns err's class.
func ClassOf(err error) Class {
	if err == nil {
		return OK
	}
	var e Error
	if !errors.As(err, &e) {
		return Transport
	}
	if e == Nil {
		return NilReply
	}
	msg := string(e)
	for _, p := range prefixes {
		if strings.HasPrefix(msg, p.prefix) {
			return p.class
		}
	}
	switch {
	case strings.Contains(msg, "ACL failure in script"), strings.Contains(msg, "The user executing the script can't"):
		// A refusal inside a script: "ERR The user executing the script
		// can't ..." on Redis 6.2 and 7.0, "ERR ACL failure in script: ..."
		// on Redis 7.2 and later and on Valkey.
		return NoPerm
	case strings.Contains(msg, "WRONGTYPE"):
		return WrongType // also raised from inside a script
	case strings.Contains(msg, "unauthenticated"):
		return Auth
	}
	return Other
}

var prefixes = []struct {
	prefix string
	class  Class
}{
	{"MOVED ", Moved},
	{"ASK ", Ask},
	{"TRYAGAIN ", TryAgain},
	{"CLUSTERDOWN ", ClusterDown},
	{"READONLY ", ReadOnly},
	{"NOSCRIPT", NoScript},
	{"NOAUTH ", Auth},
	{"WRONGPASS ", Auth},
	{"BUSY ", Busy},
	{"LOADING ", Loading},
	{"NOPERM", NoPerm},
	{"OOM ", OutOfMemory},
}

// IsServer reports whether err is a server's reply, after which the
// call's effect is known, as opposed to a transport or context error
// after which it is not.
func IsServer(err error) bool { return ClassOf(err) >= Other }

// Redirected reports whether err is a cluster's answer that a call's slot
// is served elsewhere (MOVED, or ErrNotMaster), is on its way there (ASK,
// TRYAGAIN), or has no master for now (CLUSTERDOWN): the call did not
// run, and may be sent again. No other answer is: one that will not
// change (a refused password, a busy script, an unknown command) is the
// caller's at once.
func Redirected(err error) bool {
	switch ClassOf(err) {
	case Moved, Ask, TryAgain, ClusterDown:
		return true
	case OK:
		return false
	}
	return errors.Is(err, ErrNotMaster)
}
