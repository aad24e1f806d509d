package protocol

import (
	"fmt"
	"testing"
	"time"
)

func TestPollFor(t *testing.T) {
	cn := &conn{budget: time.Millisecond, latency: map[string]time.Duration{}}
	cases := []struct {
		latency time.Duration // 0: never observed
		want    time.Duration
	}{
		{0, time.Millisecond},           // unknown: the whole budget
		{5 * time.Microsecond, minPoll}, // quick: at least minPoll
		{100 * time.Microsecond, 200 * time.Microsecond},
		{500 * time.Microsecond, time.Millisecond}, // twice the latency is the budget
		{600 * time.Microsecond, 0},                // longer than half the budget: no polling
	}
	for i, c := range cases {
		m := fmt.Sprint("m", i)
		if c.latency > 0 {
			cn.latency[m] = c.latency
		}
		if got := cn.pollForLocked(m); got != c.want {
			t.Errorf("latency %v: poll for %v, want %v", c.latency, got, c.want)
		}
	}
}

func TestObserve(t *testing.T) {
	cn := &conn{latency: map[string]time.Duration{}}
	cn.observe("save", 400*time.Microsecond)
	cn.observe("save", 0)
	if got := cn.latency["save"]; got != 300*time.Microsecond {
		t.Errorf("after 400µs then 0: %v, want the moving average 300µs", got)
	}
	for i := range 2 * maxLatencies {
		cn.observe(fmt.Sprint("method-", i), time.Microsecond)
	}
	if len(cn.latency) != maxLatencies {
		t.Errorf("%d methods remembered, want at most %d", len(cn.latency), maxLatencies)
	}
}
