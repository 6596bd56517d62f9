package ua

import (
	"sort"
	"strconv"
)

//go:generate go run ../internal/gen -schema ../schema -out .

// StatusCode is an OPC UA status code. It implements error, so a Bad code can be
// returned and tested with errors.Is. The high 16 bits carry the code, the low bits
// flags (info type, limits, overflow).
type StatusCode uint32

// IsGood reports whether the severity is Good.
func (s StatusCode) IsGood() bool { return s&0xC0000000 == 0 }

// IsUncertain reports whether the severity is Uncertain.
func (s StatusCode) IsUncertain() bool { return s&0xC0000000 == 0x40000000 }

// IsBad reports whether the severity is Bad.
func (s StatusCode) IsBad() bool { return s&0x80000000 != 0 }

// Code returns the code without the flag bits.
func (s StatusCode) Code() StatusCode { return s & 0xFFFF0000 }

// Name returns the symbolic name ("BadNodeIdUnknown"), or "" when the code is not a
// standard one. Flag bits are ignored.
func (s StatusCode) Name() string {
	if info, ok := lookupStatus(s.Code()); ok {
		return info.name
	}
	return ""
}

// Description returns the standard description of the code, or "".
func (s StatusCode) Description() string {
	if info, ok := lookupStatus(s.Code()); ok {
		return info.desc
	}
	return ""
}

// String returns the symbolic name, or the hex value when the code is not standard.
func (s StatusCode) String() string {
	if n := s.Name(); n != "" {
		if s&0xFFFF != 0 {
			return n + " (0x" + strconv.FormatUint(uint64(s), 16) + ")"
		}
		return n
	}
	return "0x" + strconv.FormatUint(uint64(s), 16)
}

// Error returns "<name> (0x<hex>): <description>".
func (s StatusCode) Error() string {
	n := s.Name()
	if n == "" {
		n = "StatusCode"
	}
	msg := n + " (0x" + strconv.FormatUint(uint64(s), 16) + ")"
	if d := s.Description(); d != "" {
		msg += ": " + d
	}
	return msg
}

// Is makes errors.Is match status codes by code, ignoring flag bits.
func (s StatusCode) Is(target error) bool {
	t, ok := target.(StatusCode)
	return ok && t.Code() == s.Code()
}

// StatusCodeByName returns the code of a symbolic name.
func StatusCodeByName(name string) (StatusCode, bool) {
	for _, info := range statusTable {
		if info.name == name {
			return info.code, true
		}
	}
	return 0, false
}

type statusInfo struct {
	code StatusCode
	name string
	desc string
}

func lookupStatus(c StatusCode) (statusInfo, bool) {
	i := sort.Search(len(statusTable), func(i int) bool { return statusTable[i].code >= c })
	if i < len(statusTable) && statusTable[i].code == c {
		return statusTable[i], true
	}
	return statusInfo{}, false
}
