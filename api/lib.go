package api

import "reflect"

// The shapes below are libcairn's own (capi/cairn.h): where cairn_call
// answers differently from the wire, and the calls only libcairn has.

// LibStatus is what libcairn's status answers instead of StatusResult: the
// mode of the handle, and the daemon's status in daemon mode.
type LibStatus struct {
	Mode      string        `json:"mode"` // "embedded" or "daemon"
	Version   string        `json:"version"`
	Workspace string        `json:"workspace"`
	PID       int           `json:"pid"`
	Daemon    *StatusResult `json:"daemon,omitempty"`
}

// LibSubscription is what libcairn's subscribe answers instead of
// SubscribeResult: a subscription id for nextEvent and unsubscribe.
type LibSubscription struct {
	Subscription uint64 `json:"subscription"`
}

// NextEventParams name a libcairn subscription (nextEvent, unsubscribe)
// and how long nextEvent may wait (0: the longest, 60 s).
type NextEventParams struct {
	Subscription uint64 `json:"subscription"`
	TimeoutMS    int64  `json:"timeout_ms,omitempty"`
}

// NextEventResult is one event of a libcairn subscription, or none when
// the wait ran out; Closed once the subscription has ended. Dropped counts
// the events lost so far because the host did not take them in time.
type NextEventResult struct {
	Event   *Event `json:"event,omitempty"`
	Closed  bool   `json:"closed"`
	Dropped uint64 `json:"dropped"`
}

// NextEvent is libcairn's call that waits for a subscription's next event.
var NextEvent = Spec[NextEventParams, NextEventResult]{"nextEvent"}

// LibMethods lists the methods libcairn adds to Methods.
var LibMethods = []Method{NextEvent.Method()}

func withLib(m Method, params, result reflect.Type) Method {
	m.LibParams, m.LibResult = params, result
	return m
}
