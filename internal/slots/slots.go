// Package slots computes Redis Cluster hash slots, and names for keys that
// must live in a given slot.
package slots

import (
	"strings"
	"sync"
)

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of returns the hash slot of key: CRC16/XMODEM of its hash tag (the part
// between the first '{' and the next '}', when not empty) or of the whole
// key, modulo Count.
func Of(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16(key)) & (Count - 1)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// tagAlphabet orders the candidates Tag searches. Part of the data layout
// on Redis: changing it would move keys that hold state.
const tagAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

var (
	tagsOnce sync.Once
	tags     []string
)

// Tag returns the hash tag, without braces, that relock uses to name a key
// in slot s: the first string over [0-9a-z], shortest first and in that
// order within a length, whose slot is s. The mapping never changes, so
// every process names the same key for a slot. The table is built once,
// on the first call (a few milliseconds). It panics if s is not a slot.
func Tag(s int) string {
	tagsOnce.Do(buildTags)
	return tags[s]
}

func buildTags() {
	tags = make([]string, Count)
	left := Count
	buf := make([]byte, 0, 4)
	var walk func(n int) bool // fills tags with every candidate of length n; true when done
	walk = func(n int) bool {
		if len(buf) == n {
			s := int(crc16(string(buf))) & (Count - 1)
			if tags[s] == "" {
				tags[s] = string(buf)
				left--
			}
			return left == 0
		}
		for i := 0; i < len(tagAlphabet); i++ {
			buf = append(buf, tagAlphabet[i])
			done := walk(n)
			buf = buf[:len(buf)-1]
			if done {
				return true
			}
		}
		return false
	}
	for n := 1; !walk(n); n++ {
	}
}
