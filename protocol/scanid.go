package protocol

import (
	"encoding/binary"
	"unicode/utf8"
)

// scanMaxLevels bounds how deep scanRequest follows nesting. It is far past
// MaxNestedLevels; it only keeps the scan's memory bounded.
const scanMaxLevels = 1 << 16

// scanLevel is an array, map or indefinite-length string being scanned.
type scanLevel struct {
	major byte   // 2 or 3 (indefinite string), 4 (array) or 5 (map)
	indef bool   // it ends with a break
	left  uint64 // definite: items still to come (a map counts keys and values)
	odd   bool   // indefinite map: a key was read and its value was not
}

// scanned is what scanRequest found.
type scanned struct {
	// wellFormed: the message is exactly one well-formed CBOR data item
	// (RFC 8949 §5.3.1), a map, nesting at most scanMaxLevels deep. The
	// fields below are set only then.
	wellFormed bool
	// id is the value of the map's text key "id" when that key appears
	// once and holds an untagged uint; else nil.
	id *uint64
	// badText: a text string somewhere in the message (a map key, a value
	// the decoder skips as unknown, a chunk) is not UTF-8.
	badText bool
}

// scanRequest walks a request message without the protocol decoder's
// rules. Well-formedness is not validity: a message the decoder refuses
// for a decode limit, a duplicate key, an indefinite length, a tag or
// invalid UTF-8 can be well-formed, and then its id can be read. The
// decoder checks UTF-8 only in the text it decodes into strings; this
// checks every text string. It never recurses, and its memory is
// proportional to the nesting depth.
func scanRequest(msg []byte) scanned {
	s := scanner{b: msg}
	h, ok := s.head()
	if !ok || h.major != 5 || h.tagged {
		return scanned{}
	}
	if !h.indef && h.arg > uint64(len(msg)) {
		return scanned{}
	}
	stack := []scanLevel{{major: 5, indef: h.indef, left: 2 * h.arg}}
	var (
		id      *uint64
		ids     int  // "id" keys seen at the top level
		bad     bool // one of them holds something other than an untagged uint
		idValue bool // the next top-level item is the value of an "id" key
		badText bool
	)
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if !top.indef && top.left == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		h, ok := s.head()
		if !ok {
			return scanned{}
		}
		if h.brk {
			if h.tagged || !top.indef || top.odd {
				return scanned{}
			}
			stack = stack[:len(stack)-1]
			continue
		}
		if top.indef && (top.major == 2 || top.major == 3) {
			// The chunks of an indefinite string: definite strings of its type.
			start := s.i
			if h.major != top.major || h.indef || h.tagged || !s.skip(h.arg) {
				return scanned{}
			}
			badText = badText || h.major == 3 && !utf8.Valid(msg[start:s.i])
			continue
		}
		isKey := false
		switch {
		case top.major == 5 && top.indef:
			isKey = !top.odd
			top.odd = !top.odd
		case top.major == 5:
			isKey = top.left%2 == 0
		}
		if !top.indef {
			top.left--
		}
		atTop := len(stack) == 1
		switch {
		case atTop && isKey:
			idValue = false
		case atTop && idValue:
			idValue = false
			ids++
			if h.major != 0 || h.tagged {
				bad = true
				break
			}
			v := h.arg
			id = &v
		}
		switch h.major {
		case 2, 3:
			if h.indef {
				stack = append(stack, scanLevel{major: h.major, indef: true})
				break
			}
			start := s.i
			if !s.skip(h.arg) {
				return scanned{}
			}
			badText = badText || h.major == 3 && !utf8.Valid(msg[start:s.i])
			if atTop && isKey {
				idValue = h.major == 3 && !h.tagged && string(msg[start:s.i]) == "id"
			}
		case 4, 5:
			n := h.arg
			if !h.indef {
				if n > uint64(len(msg)-s.i) {
					return scanned{} // each item takes at least a byte
				}
				if h.major == 5 {
					n *= 2
				}
			}
			if len(stack) >= scanMaxLevels {
				return scanned{}
			}
			stack = append(stack, scanLevel{major: h.major, indef: h.indef, left: n})
		}
		// Majors 0, 1 and 7: a number or a simple value, all in the head.
	}
	if s.i != len(msg) {
		return scanned{}
	}
	if ids != 1 || bad {
		id = nil
	}
	return scanned{wellFormed: true, id: id, badText: badText}
}

// scanner reads CBOR heads from b.
type scanner struct {
	b []byte
	i int
}

// scanHead is one data item's head, after any tags.
type scanHead struct {
	major  byte
	arg    uint64 // the argument: a value, a length or a count
	indef  bool   // additional information 31 on a string, array or map
	brk    bool   // the break stop code
	tagged bool   // one or more tags came first
}

// head reads the next item's head, with the tags before it; false when it
// is not well-formed or runs past the end.
func (s *scanner) head() (scanHead, bool) {
	var h scanHead
	for {
		if s.i >= len(s.b) {
			return h, false
		}
		ib := s.b[s.i]
		s.i++
		major, ai := ib>>5, ib&0x1f
		var arg uint64
		switch {
		case ai < 24:
			arg = uint64(ai)
		case ai <= 27:
			n := 1 << (ai - 24)
			if len(s.b)-s.i < n {
				return h, false
			}
			var buf [8]byte
			copy(buf[8-n:], s.b[s.i:s.i+n])
			arg = binary.BigEndian.Uint64(buf[:])
			s.i += n
			if major == 7 && ai == 24 && arg < 32 {
				return h, false // a two-byte simple value below 32
			}
		case ai == 31:
			switch major {
			case 2, 3, 4, 5:
				h.indef = true
			case 7:
				h.brk = true
			default:
				return h, false
			}
		default:
			return h, false // 28 to 30 are reserved
		}
		if major == 6 {
			h.tagged = true
			continue
		}
		h.major, h.arg = major, arg
		return h, true
	}
}

// skip moves past n bytes of string content; false when fewer are left.
func (s *scanner) skip(n uint64) bool {
	if n > uint64(len(s.b)-s.i) {
		return false
	}
	s.i += int(n)
	return true
}
