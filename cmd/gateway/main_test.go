package main

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func TestVersionAndUnknown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "gateway ") {
		t.Fatalf("version: code %d out %q", code, out.String())
	}
	if code := run([]string{"nope"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown: code %d err %q", code, errb.String())
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"decode", "zz"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not hex") {
		t.Fatalf("code %d err %q", code, errb.String())
	}
	errb.Reset()
	// A NodeId for an unknown message type (ns=0;i=1) followed by nothing.
	if code := run([]string{"decode"}, strings.NewReader(hex.EncodeToString([]byte{0, 1})), &out, &errb); code != 1 || !strings.Contains(errb.String(), "BadServiceUnsupported") {
		t.Fatalf("code %d err %q", code, errb.String())
	}
}
