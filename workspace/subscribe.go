package workspace

import "sync"

// note is one change delivered to subscribers.
type note struct {
	path, kind string
}

// maxSubscriberQueue bounds the changes queued for one subscriber; past it
// the queue is dropped and the subscriber gets one KindOverflow instead.
const maxSubscriberQueue = 1 << 16

type subscriber struct {
	fn       func(path, kind string)
	mu       sync.Mutex
	queue    []note
	overflow bool
	wake     chan struct{}
	quit     chan struct{}
	stopOnce sync.Once
}

func (s *subscriber) stop() { s.stopOnce.Do(func() { close(s.quit) }) }

func (s *subscriber) push(notes []note) {
	s.mu.Lock()
	if len(s.queue)+len(notes) > maxSubscriberQueue {
		s.queue = s.queue[:0]
		s.overflow = true
	} else {
		s.queue = append(s.queue, notes...)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) run() {
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		q, overflow := s.queue, s.overflow
		s.queue, s.overflow = nil, false
		s.mu.Unlock()
		if overflow {
			s.fn("", KindOverflow)
		}
		for _, n := range q {
			select {
			case <-s.quit:
				return
			default:
			}
			s.fn(n.path, n.kind)
		}
	}
}

// Subscribe calls fn(path, kind) for every change the tracker applies to a
// non-directory path, kind being KindAdded, KindModified or KindDeleted, in
// the order they were applied, from a goroutine of its own (so fn may block
// without stalling the tracker, up to a queue of 65,536 changes; past that
// fn gets one ("", KindOverflow) and should call Changes). The returned
// cancel stops delivery; a call already in progress may still finish after
// cancel returns. Close cancels every subscription and waits for them.
func (t *Tracker) Subscribe(fn func(path, kind string)) (cancel func()) {
	s := &subscriber{fn: fn, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return func() {}
	}
	t.subSeq++
	id := t.subSeq
	t.subs[id] = s
	t.subWG.Add(1)
	go func() {
		defer t.subWG.Done()
		s.run()
	}()
	return func() {
		t.mu.Lock()
		delete(t.subs, id)
		t.mu.Unlock()
		s.stop()
	}
}

// deliver hands notes to every subscriber.
func (t *Tracker) deliver(notes []note) {
	if len(notes) == 0 {
		return
	}
	t.mu.Lock()
	subs := make([]*subscriber, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.push(notes)
	}
}
