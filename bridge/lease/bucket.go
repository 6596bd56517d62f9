package lease

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The bucket: opening it (created when missing), refusing servers whose
// compare-and-set cannot be trusted, and the names of its keys.

// ErrUnsafeServer: the NATS server's compare-and-set is known to let two
// writers with the same expected revision both succeed, so leases on it
// could be granted twice.
var ErrUnsafeServer = errors.New("lease: this nats-server version can grant a lease twice")

// casSafe refuses the nats-server versions whose KV Update (a publish with
// Nats-Expected-Last-Subject-Sequence) is not a compare-and-set:
//   - before 2.9.21 on a clustered stream, the check ran before the Raft
//     proposal and concurrent writers could all pass it (nats-server#4320;
//     TestKVCompareAndSetClustered saw 279 of 300 rounds of three concurrent
//     writers on Debian's 2.9.10 with more than one success);
//   - 2.10.19 on a one-replica stream (nats-server#5840, fixed in 2.10.20).
//
// An empty or unparsable version (not connected) is not refused here: the
// writes fail on their own then.
func casSafe(version string, replicas int) error {
	var major, minor, patch int
	v := version
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return nil
	}
	below := func(a, b, c int) bool {
		return major < a || major == a && (minor < b || minor == b && patch < c)
	}
	switch {
	case replicas > 1 && below(2, 9, 21):
		return fmt.Errorf("%w: nats-server %s lets concurrent compare-and-set writes on a clustered (%d-replica) bucket all succeed (nats-server#4320, fixed in 2.9.21); upgrade the NATS cluster to 2.10.20 or later", ErrUnsafeServer, version, replicas)
	case major == 2 && minor == 10 && patch == 19:
		return fmt.Errorf("%w: nats-server %s accepts compare-and-set writes with a stale revision on a one-replica bucket (nats-server#5840, fixed in 2.10.20); upgrade NATS to 2.10.20 or later", ErrUnsafeServer, version)
	}
	return nil
}

// open opens the bucket, creating it when missing, and refuses a server
// whose compare-and-set cannot be trusted with it (casSafe).
func (l *KV) open() (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(l.ctx, max(l.tick, 2*time.Second))
	defer cancel()
	kv, err := l.openOrCreate(ctx)
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the bucket's status: %w", err)
	}
	replicas := 1
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		replicas = bs.StreamInfo().Config.Replicas
	}
	version := l.cfg.Conn.ConnectedServerVersion()
	if err := casSafe(version, replicas); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.replicas = replicas
	l.mu.Unlock()
	l.log.Info("lease: bucket open", "bucket", l.cfg.Bucket, "replicas", replicas, "natsServer", version)
	return kv, nil
}

func (l *KV) openOrCreate(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := l.js.KeyValue(ctx, l.cfg.Bucket)
	if err == nil || !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	replicas := l.cfg.Replicas
	if replicas == 0 {
		replicas = 1
		if len(l.cfg.Conn.Servers()) >= 3 {
			replicas = 3
		}
	}
	kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      l.cfg.Bucket,
		Description: "uagate scale-out leases",
		History:     1,
		Replicas:    replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		// Another replica created it meanwhile (with other settings, say).
		if kv2, err2 := l.js.KeyValue(ctx, l.cfg.Bucket); err2 == nil {
			return kv2, nil
		}
		return nil, err
	}
	l.log.Info("lease: bucket created", "bucket", l.cfg.Bucket, "replicas", replicas)
	return kv, nil
}

// unitKey and presenceKey name a unit's lease and a replica's presence; a
// name outside [A-Za-z0-9_-] is base64url-encoded after "=".
func unitKey(name string) string    { return "group." + keyToken(name) }
func presenceKey(id string) string  { return "replica." + keyToken(id) }
func isPresenceKey(key string) bool { return len(key) > 8 && key[:8] == "replica." }

func keyToken(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if plain {
		return s
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(s))
}
