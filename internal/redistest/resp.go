package redistest

import (
	"bufio"
	"context"
	"encoding"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// defaultCommandTimeout bounds internal commands whose context has no
// deadline.
const defaultCommandTimeout = 5 * time.Second

// replyError is an error reply sent by the server.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as a server error in the sense of the
// redis.Error interface of go-redis.
func (e replyError) RedisError() {}

// formatArg renders a command argument the way go-redis does.
func formatArg(a any) string {
	switch v := a.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case time.Duration:
		return strconv.FormatInt(v.Nanoseconds(), 10)
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	return fmt.Sprint(a)
}

// command sends one command on a fresh connection and reads its RESP2 reply.
// Replies are decoded as string, int64, []any or nil; an error reply is
// returned as a replyError. It is used internally so that polling never
// depends on client-side pools, retries or background goroutines.
func command(ctx context.Context, addr string, args ...string) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", addr, args[0], err)
	}
	v, err := readReply(bufio.NewReader(conn))
	if err != nil {
		if _, ok := err.(replyError); ok {
			return nil, err
		}
		return nil, fmt.Errorf("%s %s: %w", addr, args[0], err)
	}
	return v, nil
}

// readReply decodes one RESP2 value.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return nil, fmt.Errorf("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, replyError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			if err != nil {
				if re, ok := err.(replyError); ok {
					out[i] = re
					continue
				}
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// commandString runs a command whose reply is a string.
func commandString(ctx context.Context, addr string, args ...string) (string, error) {
	v, err := command(ctx, addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s %s: unexpected reply %v", addr, args[0], v)
	}
	return s, nil
}

// commandInt runs a command whose reply is an integer.
func commandInt(ctx context.Context, addr string, args ...string) (int64, error) {
	v, err := command(ctx, addr, args...)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s %s: unexpected reply %v", addr, args[0], v)
	}
	return n, nil
}

// info runs INFO (optionally for one section) and returns its fields.
func info(ctx context.Context, addr string, section ...string) (map[string]string, error) {
	s, err := commandString(ctx, addr, append([]string{"INFO"}, section...)...)
	if err != nil {
		return nil, err
	}
	return parseFields(s, ':'), nil
}

// parseFields splits "key<sep>value" lines, ignoring comments and blanks.
func parseFields(s string, sep byte) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexByte(line, sep); i > 0 {
			m[line[:i]] = line[i+1:]
		}
	}
	return m
}

// pairs turns a flat [k1, v1, k2, v2, ...] reply into a map of strings.
func pairs(v any) map[string]string {
	list, _ := v.([]any)
	m := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		k, _ := list[i].(string)
		m[k] = fmt.Sprint(list[i+1])
	}
	return m
}

// poll calls cond until it reports true, the timeout passes or ctx ends.
// Between calls it sleeps briefly. On failure the error names what was
// awaited and the last reason cond gave.
func poll(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return fmt.Errorf("redistest: waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("redistest: waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}
