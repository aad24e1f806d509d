package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
)

// encMode encodes every message: times as RFC 3339 text, no indefinite
// lengths, empty (never null) containers, omitempty with encoding/json's
// meaning.
var encMode = mustEncMode()

// decMode decodes every message, trusted or not, within the limits of
// limits.go.
var decMode = mustDecMode()

func mustEncMode() cbor.UserBufferEncMode {
	em, err := cbor.EncOptions{
		Time:          cbor.TimeRFC3339Nano,
		TimeTag:       cbor.EncTagNone,
		IndefLength:   cbor.IndefLengthForbidden,
		NilContainers: cbor.NilContainerAsEmpty,
		OmitEmpty:     cbor.OmitEmptyGoValue,
		Sort:          cbor.SortNone,
	}.UserBufferEncMode()
	if err != nil {
		panic("protocol: cbor encoder options: " + err.Error())
	}
	return em
}

func mustDecMode() cbor.DecMode {
	dm, err := DecOptions().DecMode()
	if err != nil {
		panic("protocol: cbor decoder options: " + err.Error())
	}
	return dm
}

// DecOptions returns the decoder options every message is decoded with. They
// are exported so that tests and other decoders apply the same limits.
func DecOptions() cbor.DecOptions {
	return cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		TimeTag:           cbor.DecTagIgnored,
		MaxNestedLevels:   MaxNestedLevels,
		MaxArrayElements:  MaxArrayElements,
		MaxMapPairs:       MaxMapPairs,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		IntDec:            cbor.IntDecConvertNone,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		UTF8:              cbor.UTF8RejectInvalid,
	}
}

// Marshal encodes v with the protocol's encoding rules.
func Marshal(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("protocol.Marshal: %w", err)
	}
	return b, nil
}

// Unmarshal decodes one CBOR item (and nothing after it) into v within the
// protocol's limits. Every failure wraps ErrBadRequest.
func Unmarshal(data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s", ErrBadRequest, describeDecodeError(err))
	}
	return nil
}

// describeDecodeError turns a decoder error into a short message that names
// the broken rule (and never echoes the input).
func describeDecodeError(err error) string {
	var (
		nested *cbor.MaxNestedLevelError
		arr    *cbor.MaxArrayElementsError
		mp     *cbor.MaxMapPairsError
		dup    *cbor.DupMapKeyError
		typ    *cbor.UnmarshalTypeError
		syn    *cbor.SyntaxError
		sem    *cbor.SemanticError
		indef  *cbor.IndefiniteLengthError
		tags   *cbor.TagsMdError
		extra  *cbor.ExtraneousDataError
	)
	switch {
	case errors.As(err, &nested):
		return fmt.Sprintf("nesting deeper than %d levels", MaxNestedLevels)
	case errors.As(err, &arr):
		return fmt.Sprintf("array longer than %d elements", MaxArrayElements)
	case errors.As(err, &mp):
		return fmt.Sprintf("map larger than %d pairs", MaxMapPairs)
	case errors.As(err, &dup):
		return "duplicate map key"
	case errors.As(err, &indef):
		return "indefinite-length item"
	case errors.As(err, &tags):
		return "CBOR tags are not allowed"
	case errors.As(err, &extra):
		return "bytes after the message's CBOR item"
	case errors.As(err, &typ):
		return "wrong type: " + typ.Error()
	case errors.As(err, &syn):
		return "malformed CBOR: " + syn.Error()
	case errors.As(err, &sem):
		return "invalid CBOR: " + sem.Error()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated CBOR"
	case errors.Is(err, io.EOF):
		return "empty message"
	}
	return "cannot decode: " + err.Error()
}

// Request is a request message.
type Request struct {
	// ID is chosen by the client; nil when it was missing or not a uint.
	ID     *uint64         `cbor:"id"`
	Method string          `cbor:"method"`
	Params cbor.RawMessage `cbor:"params,omitempty"`
}

// Response is a response message: exactly one of Result and Error is set.
type Response struct {
	ID     *uint64         `cbor:"id"`
	Result cbor.RawMessage `cbor:"result,omitempty"`
	Error  *WireError      `cbor:"error,omitempty"`
}

// Push is a server push (an event).
type Push struct {
	Event string         `cbor:"event" json:"event"`
	Data  map[string]any `cbor:"data" json:"data"`
}

// successMsg and failureMsg are what the daemon encodes; keeping them
// separate keeps "result" present for an empty result.
type successMsg struct {
	ID     uint64 `cbor:"id"`
	Result any    `cbor:"result"`
}

type failureMsg struct {
	ID    *uint64   `cbor:"id"`
	Error WireError `cbor:"error"`
}

// requestMsg is what the client encodes.
type requestMsg struct {
	ID     uint64 `cbor:"id"`
	Method string `cbor:"method"`
	Params any    `cbor:"params"`
}

// request is what DecodeRequest decodes: Method is nil when the key is
// missing, which is bad_request, and "" when it is empty, which names no
// method (method_not_found). Params is a slice of the message.
type request struct {
	ID     *uint64     `cbor:"id"`
	Method *string     `cbor:"method"`
	Params borrowedRaw `cbor:"params,omitempty"`
}

// borrowedRaw is an encoded CBOR item decoded as the slice of the input it
// occupies, where cbor.RawMessage copies it.
type borrowedRaw []byte

// UnmarshalCBOR keeps b itself (the decoder has checked it is one
// well-formed item).
func (m *borrowedRaw) UnmarshalCBOR(b []byte) error {
	*m = b
	return nil
}

// DecodeRequest decodes an untrusted request message. On failure it returns
// an error wrapping ErrBadRequest and, when the id could still be read, a
// Request carrying it (so the answer can name it): a message refused for a
// decode limit, a duplicate key, an indefinite length, a tag or invalid
// UTF-8 still names its id when it is well-formed CBOR (see scanRequest).
// Every text string of the message must be UTF-8, those of keys it ignores
// included. The request's Params are a copy.
func DecodeRequest(msg []byte) (*Request, error) {
	req, err := DecodeRequestBorrowed(msg)
	if req != nil && req.Params != nil {
		req.Params = append(cbor.RawMessage(nil), req.Params...)
	}
	return req, err
}

// DecodeRequestBorrowed is DecodeRequest, but the request's Params are the
// bytes of msg they occupy, not a copy: they are valid only as long as msg
// is unchanged. cairnd uses it to skip copying a request's params (a
// checkpoint's are several KiB) out of the buffer the message was read
// into, which it reuses only once the request's handler has returned.
func DecodeRequestBorrowed(msg []byte) (*Request, error) {
	var r request
	if err := Unmarshal(msg, &r); err != nil {
		if id := scanRequest(msg).id; id != nil {
			return &Request{ID: id}, err
		}
		return nil, err
	}
	req := &Request{ID: r.ID, Params: cbor.RawMessage(r.Params)}
	switch {
	case scanRequest(msg).badText:
		// The decoder checked only what it decoded into strings so far;
		// params and unknown keys must be UTF-8 too.
		return req, fmt.Errorf("%w: a text string is not valid UTF-8", ErrBadRequest)
	case r.ID == nil:
		return req, fmt.Errorf("%w: the request has no uint id", ErrBadRequest)
	case r.Method == nil:
		return req, fmt.Errorf("%w: the request has no method", ErrBadRequest)
	}
	req.Method = *r.Method
	return req, nil
}

// DecodeParams decodes a request's params into v. Absent or null params
// leave v as it is.
func DecodeParams(params cbor.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	return Unmarshal(params, v)
}

// EncodeResult encodes the success response to request id. A
// checkpoint's result, the answer cairnd writes every agent turn, is
// encoded without the encoder's reflection, byte for byte as the encoder
// writes it.
func EncodeResult(id uint64, result any) ([]byte, error) {
	if _, ok := result.(api.CheckpointResult); ok {
		return AppendResult(make([]byte, 0, 48), id, result)
	}
	return Marshal(successMsg{ID: id, Result: result})
}

// AppendResult appends the success response to request id to dst, as
// EncodeResult encodes it: a server that reuses dst for its answers
// (MessageBufs) encodes a page of megabytes into memory it already has,
// where EncodeResult copies it out into a fresh slice.
func AppendResult(dst []byte, id uint64, result any) ([]byte, error) {
	if r, ok := result.(api.CheckpointResult); ok {
		return appendCheckpointResult(appendSuccess(dst, id), &r), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := encMode.MarshalToBuffer(successMsg{ID: id, Result: result}, buf); err != nil {
		return dst, fmt.Errorf("protocol.Marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// EncodeError encodes the failure response to request id (nil: unknown).
func EncodeError(id *uint64, we WireError) ([]byte, error) {
	return Marshal(failureMsg{ID: id, Error: we})
}

// EncodePush encodes a push message.
func EncodePush(event string, data map[string]any) ([]byte, error) {
	if data == nil {
		data = map[string]any{}
	}
	return Marshal(Push{Event: event, Data: data})
}

// EncodeRequest encodes a request message.
func EncodeRequest(id uint64, method string, params any) ([]byte, error) {
	if params == nil {
		params = struct{}{}
	}
	return Marshal(requestMsg{ID: id, Method: method, Params: params})
}

// inbound is any message a client receives.
type inbound struct {
	ID     *uint64         `cbor:"id"`
	Result cbor.RawMessage `cbor:"result"`
	Error  *WireError      `cbor:"error"`
	Event  string          `cbor:"event"`
	Data   cbor.RawMessage `cbor:"data"`
}
