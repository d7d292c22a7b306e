package door

import (
	"fmt"
	"strconv"
)

// Reply is a command's reply: a value, or an error. A value is an int64,
// a string, a []any of values, or, from a RESP3 connection, a bool or a
// map[any]any; the drivers turn their client library's replies into
// these.
type Reply struct {
	val any
	err error
}

// Value returns the reply v.
func Value(v any) Reply { return Reply{val: v} }

// Failed returns the reply that is err.
func Failed(err error) Reply { return Reply{err: err} }

// Val returns the reply's value, nil with an error.
func (r Reply) Val() any { return r.val }

// Err returns the reply's error.
func (r Reply) Err() error { return r.err }

// Result returns the value and the error.
func (r Reply) Result() (any, error) { return r.val, r.err }

// Int64 returns an integer reply, or a string one that reads as one.
func (r Reply) Int64() (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	return toInt64(r.val)
}

// Bool returns a boolean reply, or an integer one as true unless 0.
func (r Reply) Bool() (bool, error) {
	if b, ok := r.val.(bool); ok && r.err == nil {
		return b, nil
	}
	n, err := r.Int64()
	return n != 0, err
}

// Text returns a string reply, or an integer one in decimal.
func (r Reply) Text() (string, error) {
	if r.err != nil {
		return "", r.err
	}
	switch v := r.val.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("relock: unexpected reply %T, want a string", r.val)
}

// Slice returns an array reply.
func (r Reply) Slice() ([]any, error) {
	if r.err != nil {
		return nil, r.err
	}
	v, ok := r.val.([]any)
	if !ok {
		return nil, fmt.Errorf("relock: unexpected reply %T, want an array", r.val)
	}
	return v, nil
}

// Int64Slice returns an array reply of integers.
func (r Reply) Int64Slice() ([]int64, error) {
	a, err := r.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(a))
	for i, v := range a {
		if out[i], err = toInt64(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StringSlice returns an array reply of strings (integers in decimal).
func (r Reply) StringSlice() ([]string, error) {
	a, err := r.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(a))
	for i, v := range a {
		if out[i], err = Value(v).Text(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StringMap returns a map reply (RESP3), or an array of fields and values
// (RESP2), as a map of strings.
func (r Reply) StringMap() (map[string]string, error) {
	if r.err != nil {
		return nil, r.err
	}
	out := make(map[string]string)
	put := func(k, v any) error {
		ks, err := Value(k).Text()
		if err != nil {
			return err
		}
		vs, err := Value(v).Text()
		out[ks] = vs
		return err
	}
	switch v := r.val.(type) {
	case map[any]any:
		for k, x := range v {
			if err := put(k, x); err != nil {
				return nil, err
			}
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			if err := put(v[i], v[i+1]); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("relock: unexpected reply %T, want a map", r.val)
	}
	return out, nil
}

func toInt64(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case string:
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, fmt.Errorf("relock: unexpected reply %T, want an integer", v)
}
