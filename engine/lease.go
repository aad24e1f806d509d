package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// DefaultLeaseTTL is how long a host's lease on a run or a workflow lasts
// without renewal, on a store that hosts share.
const DefaultLeaseTTL = 30 * time.Second

// leases is the engine's side of session.Leaser: the host it holds leases
// as, the tokens it holds, and the loop that renews them. All of it is
// inert (leaser nil) on a store that does not implement Leaser.
type leases struct {
	leaser session.Leaser
	host   string
	ttl    time.Duration

	mu     sync.Mutex
	tokens map[string]int64 // lease key -> fencing token this host holds

	stop chan struct{}
	done chan struct{}
}

// defaultHost names this host for leases: the machine and the workspace,
// so a daemon restarted on the same workspace is the same holder and
// carries on with the runs it held, while another workspace is another.
func defaultHost(root string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	if root == "" {
		return fmt.Sprintf("%s:pid%d", h, os.Getpid())
	}
	return h + ":" + root
}

func (l *leases) init(store session.Store, opts Options, log interface {
	Warn(string, ...any)
}) {
	lr, ok := store.(session.Leaser)
	if !ok {
		return
	}
	l.leaser, l.host, l.ttl = lr, opts.Host, opts.LeaseTTL
	if l.host == "" {
		l.host = defaultHost(opts.Root)
	}
	if l.ttl <= 0 {
		l.ttl = DefaultLeaseTTL
	}
	l.tokens = map[string]int64{}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.renew(log)
}

// renew extends every lease this host holds three times per lease length,
// so a run whose turns take longer than a lease keeps it while its host
// lives, and a dead host's leases expire one lease length after it died.
func (l *leases) renew(log interface{ Warn(string, ...any) }) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			if _, err := l.leaser.RenewLeases(ctx, l.host, l.ttl); err != nil {
				log.Warn("renewing leases failed; they may expire", "host", l.host, "error", err)
			}
			cancel()
		}
	}
}

// close stops the renewal and gives up this host's leases: a host that
// stops cleanly lets another pick its runs and workflows up at once. A
// host that dies keeps them until they expire.
func (l *leases) close() {
	if l.leaser != nil {
		close(l.stop)
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = l.leaser.ReleaseLeases(ctx, l.host) // best effort: they expire anyway
	}
}

// acquire takes the lease on key for this host (takeover: even from a live
// holder) and remembers its token.
func (l *leases) acquire(ctx context.Context, key string, takeover bool) error {
	if l.leaser == nil {
		return nil
	}
	got, err := l.leaser.AcquireLease(ctx, key, l.host, l.ttl, takeover)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.tokens[key] = got.Token
	l.mu.Unlock()
	return nil
}

// release drops this host's lease on key.
func (l *leases) release(ctx context.Context, key string) {
	if l.leaser == nil {
		return
	}
	l.mu.Lock()
	delete(l.tokens, key)
	l.mu.Unlock()
	// Best effort: a lease left behind only expires.
	_ = l.leaser.ReleaseLease(ctx, key, l.host)
}

// fence returns the fence for a write to key by this host: the token it
// holds, read back from the store after a restart. A lease another host
// holds is not_owner before anything is written; a key with no lease (a
// run begun before leases, or released) is acquired, never taken over.
func (l *leases) fence(ctx context.Context, key string) (*session.Fence, error) {
	if l.leaser == nil {
		return nil, nil
	}
	l.mu.Lock()
	tok, ok := l.tokens[key]
	l.mu.Unlock()
	if !ok {
		cur, err := l.leaser.LeaseOf(ctx, key)
		switch {
		case isCode(err, session.CodeNotFound):
			if err := l.acquire(ctx, key, false); err != nil {
				if isCode(err, session.CodeConflict) {
					return nil, session.Errorf(session.CodeNotOwner, "%s: %v", key, err)
				}
				return nil, err
			}
			return l.fence(ctx, key)
		case err != nil:
			return nil, err
		case cur.Holder != l.host:
			return nil, session.Errorf(session.CodeNotOwner, "%s is held by host %q (token %d), not this host %q: it was taken over; nothing was written", key, cur.Holder, cur.Token, l.host)
		}
		tok = cur.Token
		l.mu.Lock()
		l.tokens[key] = tok
		l.mu.Unlock()
	}
	return &session.Fence{Key: key, Holder: l.host, Token: tok, TTL: l.ttl}, nil
}

// forget drops a token the store refused, so the next write reads the
// lease again.
func (l *leases) forget(key string, err error) {
	if l.leaser != nil && isCode(err, session.CodeNotOwner) {
		l.mu.Lock()
		delete(l.tokens, key)
		l.mu.Unlock()
	}
}

type fenceKey struct{}

// withFence makes rmw's commit on ctx conditional on f. A context value
// keeps the many rmw callers unchanged: only the fenced operations set it.
func withFence(ctx context.Context, f *session.Fence) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) *session.Fence {
	f, _ := ctx.Value(fenceKey{}).(*session.Fence)
	return f
}
