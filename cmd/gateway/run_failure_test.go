package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
)

// TestRunUpstreamPermanentFailure: `gateway run -upstream …` whose first
// connection fails for good (a server certificate not trusted, a wrong
// password) ends with that error and exit code 1 instead of retrying slowly
// in the background.
func TestRunUpstreamPermanentFailure(t *testing.T) {
	srv, err := server.New(&server.Config{
		Address: "127.0.0.1:0", Policies: server.DefaultPolicies(),
		Users: map[string]string{"operator": "secret"},
		Sim:   server.SimConfig{Folders: -1, Variables: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the error
	}{
		{"UntrustedCertificate", []string{"-policy", "Basic256Sha256"}, []string{"certificate-untrusted", "is not trusted", "gateway pki trust"}},
		{"WrongPassword", []string{"-policy", "None", "-auto-accept", "-user", "operator", "-password", "guess"}, []string{"identity-rejected", "BadUserAccessDenied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			args := append([]string{"run", "-upstream", srv.URL(), "-nodes", server.NodeCounter, "-pki", t.TempDir()}, tc.args...)
			var stderr testutil.LockedBuffer
			done := make(chan int, 1)
			start := time.Now()
			go func() { done <- run(args, nil, io.Discard, &stderr) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("still running after 60 s; stderr:\n%s", stderr.String())
			}
			t.Logf("exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), lastLine(stderr.String()))
			if code != 1 {
				t.Errorf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
			}
			last := lastLine(stderr.String())
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("the error %q does not say %q", last, w)
				}
			}
			if strings.Contains(stderr.String(), "guess") {
				t.Error("the password is on stderr")
			}
		})
	}

	// The same through cmdRunGateway: the error, not a clean stop.
	isolate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cmdRunGateway(ctx, []string{"-upstream", srv.URL(), "-policy", "Basic256Sha256", "-pki", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("cmdRunGateway: %v (context %v)", err, ctx.Err())
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
