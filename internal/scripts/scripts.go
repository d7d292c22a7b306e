// Package scripts holds relock's Lua scripts, one embedded file per
// operation, with the digests by which the server caches them; the door
// (internal/door) runs them by EVALSHA, with EVAL when the server's script
// cache does not know them (after a restart or failover). Each script has a
// request type that builds its KEYS and ARGV from named fields, in the
// order its header names them, and a reply type it decodes into, so that no
// caller knows an argument's position or a reply's encoding. Redis does not
// undo the writes of a script that fails, so each script reads what could
// make it fail before its first write (see docs/design.md, Scripts).
package scripts

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"regexp"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Script is one Lua script with its SHA1 digest.
type Script struct {
	name string
	src  string
	sha  string
	// The digest and source as command arguments, boxed once.
	shaArg, srcArg any
}

// byName holds every script loaded, by name.
var byName = make(map[string]*Script)

func load(name string) *Script {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("scripts: missing embedded file " + name + ".lua")
	}
	sum := sha1.Sum(b)
	s := &Script{name: name, src: string(b), sha: hex.EncodeToString(sum[:])}
	s.shaArg, s.srcArg = s.sha, s.src
	byName[name] = s
	return s
}

// Named returns the script loaded from the file name + ".lua", or nil.
func Named(name string) *Script { return byName[name] }

// The scripts are declared in the files named for what they serve
// (lock.go, rw.go, fair.go, synchronizers.go, election.go, renew.go,
// client.go), each with the request type that builds its KEYS and ARGV
// and the reply type it decodes into.

// loadWith loads a script with the declarations of the library files
// libs that it uses inserted after its header, in order, so that its
// source still begins with it. Every declaration is a closure or a value
// the server makes again on each call, so one the script never reaches is
// left out (see declarations), and a script whose common case needs few of
// them may defer the rest: at each line of its body that reads exactly
// "-- @library", loadWith puts the declarations that the code after the
// line uses and the code before it did not. A call that returns before
// such a line makes none of the closures declared there.
func loadWith(name string, libs ...string) *Script {
	s := load(name)
	header, body, ok := strings.Cut(s.src, "\n\n")
	if !ok {
		panic("scripts: " + name + ".lua has no header")
	}
	var decls []declaration
	for _, lib := range libs {
		libraries[lib] = true
		b, err := files.ReadFile(lib + ".lua")
		if err != nil {
			panic("scripts: missing embedded file " + lib + ".lua")
		}
		decls = append(decls, declarations(string(b))...)
	}
	var b strings.Builder
	b.WriteString(header + "\n\n")
	put := make([]bool, len(decls))
	for i, part := range strings.Split(body, libraryMark) {
		if i > 0 {
			b.WriteString(libraryMark)
		}
		b.WriteString(used(decls, part, put))
		b.WriteString(part)
	}
	s.src = b.String()
	sum := sha1.Sum([]byte(s.src))
	s.sha = hex.EncodeToString(sum[:])
	s.shaArg, s.srcArg = s.sha, s.src
	return s
}

// libraryMark is the line of a script's body at which loadWith puts the
// declarations the code after it uses, with the line break before it.
const libraryMark = "\n-- @library\n"

// libraries holds the names of the library files loadWith has read.
var libraries = make(map[string]bool)

// declaration is one top-level declaration of a library file, with the
// comment above it: its text and the names it declares.
type declaration struct {
	text  string
	names []string
}

// declared matches a top-level local of a library file: "local function
// f(", "local x =" or "local x".
var declared = regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)

// declarations splits a library file at each blank line followed by a
// top-level line (a comment or a local), so that a function body, which
// is indented, is never split. Pieces that declare nothing (the file's own
// header) are dropped.
func declarations(src string) []declaration {
	var out []declaration
	add := func(text string) {
		var names []string
		for _, m := range declared.FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
		if len(names) > 0 {
			out = append(out, declaration{text: strings.TrimSpace(text) + "\n", names: names})
		}
	}
	lines := strings.SplitAfter(src, "\n")
	start := 0
	for i := 1; i < len(lines); i++ {
		top := strings.HasPrefix(lines[i], "--") || strings.HasPrefix(lines[i], "local ")
		if top && strings.TrimSpace(lines[i-1]) == "" {
			add(strings.Join(lines[start:i], ""))
			start = i
		}
	}
	add(strings.Join(lines[start:], ""))
	return out
}

// used returns, in their order, the declarations that code refers to,
// directly or through the declarations it uses, leaving out those put
// marks as given already, and marks the ones it returns.
func used(decls []declaration, code string, put []bool) string {
	in := make([]bool, len(decls))
	code = uncommented(code)
	for grew := true; grew; {
		grew = false
		for i, d := range decls {
			if !in[i] && !put[i] && refers(code, d.names) {
				in[i], grew = true, true
				code += uncommented(d.text)
			}
		}
	}
	var b strings.Builder
	for i, d := range decls {
		if in[i] {
			put[i] = true
			b.WriteString(d.text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// uncommented returns Lua source without its comments ("--" to the end of
// a line; the scripts have no "--" within a string), so that a name a
// comment mentions is not taken for a use.
func uncommented(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		if code, _, found := strings.Cut(line, "--"); found {
			b.WriteString(code)
			b.WriteByte('\n')
		} else {
			b.WriteString(line)
		}
	}
	return b.String()
}

// refers reports whether code names any of names as a whole word.
func refers(code string, names []string) bool {
	for _, n := range names {
		for rest := code; ; {
			i := strings.Index(rest, n)
			if i < 0 {
				break
			}
			before, after := i > 0 && isWord(rest[i-1]), i+len(n) < len(rest) && isWord(rest[i+len(n)])
			if !before && !after {
				return true
			}
			rest = rest[i+len(n):]
		}
	}
	return false
}

func isWord(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// Name returns the script's file name without extension.
func (s *Script) Name() string { return s.name }

// SHA returns the hex SHA1 digest by which the server caches the script.
func (s *Script) SHA() string { return s.sha }

// Source returns the Lua source.
func (s *Script) Source() string { return s.src }

// Keys returns key names as command arguments. A caller that runs a
// script with the same keys again and again keeps the result, so that the
// names are boxed once.
func Keys(names ...string) []any {
	keys := make([]any, len(names))
	for i, n := range names {
		keys[i] = n
	}
	return keys
}

// Boxed returns the digest and the source as command arguments (of
// EVALSHA and EVAL), boxed once.
func (s *Script) Boxed() (sha, src any) { return s.shaArg, s.srcArg }

// toInt64 reads an integer of a script's reply.
func toInt64(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	return 0
}
