package protocol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/api"
)

// Subscription receives the events of one Subscribe call. Events arrive on
// C in the order the daemon pushed them. C is closed when the subscription
// ends: by Close, or because the connection was lost (Err says which).
// Subscriptions do not survive a reconnect.
type Subscription struct {
	// C delivers the events. It has a bounded buffer: when the receiver
	// falls behind, further events are dropped and counted (Dropped).
	C <-chan api.Event

	ch      chan api.Event
	filter  map[string]bool // nil: every event
	cn      *conn
	client  *Client
	dropped atomic.Uint64

	once sync.Once
	mu   sync.Mutex // guards err
	err  error
}

// Subscribe subscribes to the named events (none: all of them) and returns
// the subscription. The daemon also pushes api.EventDropped, delivered to every
// subscription, when it had to drop events for this connection.
func (c *Client) Subscribe(ctx context.Context, events ...string) (*Subscription, error) {
	cn, err := c.connFor(ctx)
	if err != nil {
		return nil, err
	}
	s := &Subscription{cn: cn, client: c, ch: make(chan api.Event, cn.evBuf)}
	s.C = s.ch
	if len(events) > 0 {
		s.filter = map[string]bool{api.EventDropped: true}
		for _, e := range events {
			s.filter[e] = true
		}
	}
	// Register before asking, so no event pushed after the answer is lost.
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return nil, err
	}
	cn.subs[s] = struct{}{}
	cn.mu.Unlock()
	if err := cn.call(ctx, api.Subscribe.Name, api.SubscribeParams{Events: slices.Clone(events)}, nil); err != nil {
		s.detach()
		s.end(err)
		return nil, fmt.Errorf("protocol.Subscribe: %w", err)
	}
	return s, nil
}

// offer delivers ev unless the buffer is full; called with cn.mu held, so it
// never races with end.
func (s *Subscription) offer(ev api.Event) {
	if s.filter != nil && !s.filter[ev.Type] {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.dropped.Add(1)
	}
}

// end closes C once, recording why.
func (s *Subscription) end(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.ch)
	})
}

// detach removes s from its connection and reports whether it was the last
// subscription there.
func (s *Subscription) detach() (last bool) {
	s.cn.mu.Lock()
	defer s.cn.mu.Unlock()
	if _, ok := s.cn.subs[s]; !ok {
		return false
	}
	delete(s.cn.subs, s)
	return len(s.cn.subs) == 0
}

// Dropped reports how many events this subscription dropped because C was
// full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Err reports why C was closed: nil while open or after Close, else the
// connection's failure.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(s.err, ErrClosed) {
		return nil
	}
	return s.err
}

// Close ends the subscription and closes C. When it was the connection's
// last subscription, it also tells the daemon to stop pushing events.
func (s *Subscription) Close(ctx context.Context) error {
	last := s.detach()
	s.end(ErrClosed)
	if last && s.cn.alive() {
		if err := s.cn.call(ctx, api.Unsubscribe.Name, api.SubscribeParams{}, nil); err != nil {
			return fmt.Errorf("protocol.Subscription.Close: %w", err)
		}
	}
	return nil
}
