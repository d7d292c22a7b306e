package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// The fair lock's scripts. Each is its own file with the queue functions
// of fair_queue.lua put between its header and its body, so that its
// source still begins with its header.
var (
	FairLock        = loadFair("fair_lock")
	FairUnlock      = loadFair("fair_unlock")
	FairLeave       = loadFair("fair_leave")
	FairForceUnlock = loadFair("fair_forceunlock")
)

func loadFair(name string) *Script {
	lib, err := files.ReadFile("fair_queue.lua")
	if err != nil {
		panic("scripts: missing embedded file fair_queue.lua")
	}
	s := load(name)
	header, body, ok := strings.Cut(s.src, "\n\n")
	if !ok {
		panic("scripts: " + name + ".lua has no header")
	}
	s.src = header + "\n\n" + string(lib) + "\n" + body
	sum := sha1.Sum([]byte(s.src))
	s.sha = hex.EncodeToString(sum[:])
	return s
}
