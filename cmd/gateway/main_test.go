package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// benchChildEnv makes this test binary the gateway binary: the bench harness
// starts its children (sim, run, bench-subscriber) as `<test binary> <command>
// …`, and TestMain runs the command instead of the tests.
const benchChildEnv = "UAGATE_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The gateways these tests run in this process would lower the
	// collector's GOGC after their setup (bridge/gateway's memory policy)
	// for the whole test binary, whose heap is small and whose tests
	// allocate a lot: many more collections. bridge/gateway's
	// TestMemReleaserGCPercent checks that setting on its own.
	if os.Getenv("GOGC") == "" {
		os.Setenv("GOGC", "100")
	}
	os.Exit(m.Run())
}

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
