package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	envRedisURL     = "RELOCK_REDIS_URL"
	defaultRedisURL = "redis://127.0.0.1:6379"
	clusterScheme   = "redis+cluster"
	clusterTLS      = "rediss+cluster"
	sentinelScheme  = "redis+sentinel"
	sentinelTLS     = "rediss+sentinel"
	connectTimeout  = 5 * time.Second
)

// redisFlags are the connection flags every subcommand that talks to Redis
// shares.
type redisFlags struct {
	url     string
	cluster bool
}

func addRedisFlags(fs *flag.FlagSet) *redisFlags {
	f := &redisFlags{}
	fs.StringVar(&f.url, "redis", "", "Redis `URL` (default $"+envRedisURL+", else "+defaultRedisURL+")")
	fs.BoolVar(&f.cluster, "cluster", false, "treat the URL's host as a seed of a Redis Cluster")
	return f
}

// target is a resolved Redis deployment.
type target struct {
	url      string // as given
	cluster  bool
	single   *redis.Options
	multi    *redis.ClusterOptions
	failover *redis.FailoverOptions // a Sentinel-managed master
}

// resolve picks the URL from the flag, the environment, or fallback (""
// means none), and parses it.
func (f *redisFlags) resolve(e *env, fallback string) (*target, error) {
	u := f.url
	if u == "" {
		u = e.getenv(envRedisURL)
	}
	if u == "" {
		u = fallback
	}
	if u == "" {
		return nil, nil
	}
	return parseTarget(u, f.cluster)
}

// parseTarget parses a redis://, rediss://, unix://, redis+cluster:// or
// redis+sentinel:// URL. cluster forces a Redis Cluster for redis:// and rediss:// URLs,
// whose extra seeds then come as ?addr=host:port parameters.
func parseTarget(raw string, cluster bool) (*target, error) {
	t := &target{url: raw}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("invalid Redis URL %q: want redis://host:port", redact(raw))
	}
	switch strings.ToLower(scheme) {
	case clusterScheme, clusterTLS:
		base := "redis"
		if strings.EqualFold(scheme, clusterTLS) {
			base = "rediss"
		}
		u, err := clusterURL(base, rest)
		if err != nil {
			return nil, fmt.Errorf("invalid Redis URL %q: %w", redact(raw), err)
		}
		raw, cluster = u, true
	case sentinelScheme, sentinelTLS:
		if cluster {
			return nil, errors.New("--cluster needs a redis:// or redis+cluster:// URL, not a Sentinel one")
		}
		base := "redis"
		if strings.EqualFold(scheme, sentinelTLS) {
			base = "rediss"
		}
		var err error
		if t.failover, err = sentinelOptions(base, rest); err != nil {
			return nil, fmt.Errorf("invalid Redis URL %q: %w", redact(raw), err)
		}
		return t, nil
	case "unix":
		if cluster {
			return nil, errors.New("--cluster needs a redis:// or redis+cluster:// URL, not unix://")
		}
	}
	var err error
	if cluster {
		t.cluster = true
		t.multi, err = redis.ParseClusterURL(raw)
	} else {
		t.single, err = redis.ParseURL(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid Redis URL %q: %w", redact(t.url), err)
	}
	return t, nil
}

// clusterURL turns the part after "redis+cluster://" ("[user:pass@]h1:p1,
// h2:p2[/][?query]") into the form redis.ParseClusterURL takes:
// base://[user:pass@]h1:p1?addr=h2:p2&query.
func clusterURL(base, rest string) (string, error) {
	hosts, query, _ := strings.Cut(rest, "?")
	hosts = strings.TrimSuffix(hosts, "/")
	if strings.Contains(hosts, "/") {
		return "", errors.New("a cluster URL takes no database number")
	}
	userinfo := ""
	if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
		userinfo, hosts = hosts[:at+1], hosts[at+1:]
	}
	addrs := strings.Split(hosts, ",")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", err
	}
	for _, a := range addrs[1:] {
		if a == "" {
			return "", errors.New("empty host in the host list")
		}
		q.Add("addr", a)
	}
	if addrs[0] == "" {
		return "", errors.New("no host")
	}
	u := base + "://" + userinfo + addrs[0]
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}

// sentinelOptions parses the part after "redis+sentinel://":
// "[user:pass@]h1:p1,h2:p2/master[/db][?query]", the sentinels' addresses
// and the name they monitor the master under. The user and password are
// the Redis servers'; sentinel_username and sentinel_password in the
// query are the sentinels'. Other query parameters are go-redis's
// (dial_timeout=3s, ...).
func sentinelOptions(base, rest string) (*redis.FailoverOptions, error) {
	hostPart, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(hostPart, "/")
	var user *url.Userinfo
	if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
		u, err := url.Parse("redis://" + hosts[:at+1] + "h")
		if err != nil {
			return nil, err
		}
		user, hosts = u.User, hosts[at+1:]
	}
	master, db, _ := strings.Cut(path, "/")
	if master == "" {
		return nil, errors.New("no master name: want redis+sentinel://host:port,host:port/master")
	}
	addrs := strings.Split(hosts, ",")
	if addrs[0] == "" {
		return nil, errors.New("no sentinel host")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	for _, a := range addrs[1:] {
		if a == "" {
			return nil, errors.New("empty host in the host list")
		}
		q.Add("addr", a)
	}
	q.Set("master_name", master)
	if db != "" {
		q.Set("db", db)
	}
	o, err := redis.ParseFailoverURL(base + "://" + addrs[0] + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	if user != nil {
		o.Username = user.Username()
		o.Password, _ = user.Password()
	}
	o.SentinelUsername, o.SentinelPassword = sentinelUser, sentinelPass
	return o, nil
}

// redact hides a password in a URL meant for messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// String describes the target for messages.
func (t *target) String() string {
	if t.cluster {
		return "Redis Cluster " + strings.Join(t.multi.Addrs, ",")
	}
	if t.failover != nil {
		return fmt.Sprintf("master %q of Sentinels %s", t.failover.MasterName, strings.Join(t.failover.SentinelAddrs, ","))
	}
	return redact(t.url)
}

// client returns a new go-redis client for the target. The caller closes
// it.
func (t *target) client() redis.UniversalClient {
	if t.cluster {
		o := *t.multi
		return redis.NewClusterClient(&o)
	}
	if t.failover != nil {
		o := *t.failover
		return redis.NewFailoverClient(&o)
	}
	o := *t.single
	return redis.NewClient(&o)
}

// connect returns a client for the target after checking that the server
// answers.
func (t *target) connect(ctx context.Context) (redis.UniversalClient, error) {
	rdb := t.client()
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", t, err)
	}
	return rdb, nil
}

// open resolves the Redis target of a command other than demo and connects
// to it. On failure it reports the error and returns the exit code, with a
// nil client.
func (f *redisFlags) open(ctx context.Context, e *env, fs *flag.FlagSet) (redis.UniversalClient, int) {
	t, err := f.resolve(e, defaultRedisURL)
	if err != nil {
		return nil, usageError(e, fs, "%v", err)
	}
	rdb, err := t.connect(ctx)
	if err != nil {
		return nil, fail(e, fs, err)
	}
	return rdb, 0
}
