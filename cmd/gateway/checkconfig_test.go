package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"check-config"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckConfig(t *testing.T) {
	t.Run("Valid", func(t *testing.T) {
		p := writeFile(t, "gw.yaml", `
endpoints:
  - name: plc
    url: opc.tcp://plc.example:4840
    identity: {username: op, password: inline-pw}
writerGroups:
  - name: line1
    writers:
      - name: a
        fields: [{node: ns=2;s=A}, {node: ns=2;s=B}]
      - name: b
        fields: [{node: ns=2;s=C}]
        browse: [{root: "ns=2;s=Folder"}]
sinks:
  mqtt: [{url: tcp://broker:1883}]
  file: [{path: "-"}]
`)
		code, out, errs := runCheck(t, p)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		want := "warning: " + p + ":5:40: endpoints[0].identity.password: inline secret; prefer {file: …} or {env: …} so that it stays out of the configuration file\n" +
			"ok: 1 endpoints, 1 writer groups, 2 writers, 3 fields, 2 sinks (and 1 browse selections, expanded when the writers start)\n"
		if out != want {
			t.Errorf("stdout\n%s\nwant\n%s", out, want)
		}
		if strings.Contains(out+errs, "inline-pw") {
			t.Errorf("the secret is printed")
		}
	})
	t.Run("Empty", func(t *testing.T) {
		// No configuration: the embedded defaults.
		code, out, _ := runCheck(t, writeFile(t, "empty.yaml", "# nothing\n"))
		if code != 0 || out != "ok: 1 endpoints, 1 writer groups, 1 writers, 4 fields, 3 sinks\n" {
			t.Errorf("exit %d, stdout %q", code, out)
		}
	})
	t.Run("PublishedNodes", func(t *testing.T) {
		code, out, errs := runCheck(t, filepath.Join("..", "..", "bridge", "config", "publishednodes", "testdata", "pn_2.9.json"))
		if code != 0 || !strings.HasSuffix(out, "ok: 3 endpoints, 5 writer groups, 5 writers, 5 fields, 3 sinks\n") || !strings.Contains(out, "warning: ") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		p := writeFile(t, "bad.yaml", `gateway:
  publisherID: x
writerGroups:
  - name: g
    endpoint: nope
    writers: [{name: w, fields: [{node: "ns=x"}]}]
`)
		code, out, errs := runCheck(t, p)
		want := p + `:2:3: gateway.publisherID: unknown key "publisherID" (did you mean "publisherId"?)` + "\n" +
			p + `:5:5: writerGroups[0].endpoint: no endpoint is named "nope"` + "\n" +
			p + `:6:35: writerGroups[0].writers[0].fields[0].node: "ns=x" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)` + "\n" +
			"gateway: check-config: " + p + ": 3 errors\n"
		if code != 2 || out != "" || errs != want {
			t.Errorf("exit %d\nstdout %q\nstderr\n%s\nwant\n%s", code, out, errs, want)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		if code, _, errs := runCheck(t); code != 2 || !strings.Contains(errs, "check-config needs one file") {
			t.Errorf("no file: exit %d\n%s", code, errs)
		}
		missing := filepath.Join(t.TempDir(), "missing.yaml")
		if code, _, errs := runCheck(t, missing); code != 2 || !strings.Contains(errs, missing+": open: no such file or directory") {
			t.Errorf("missing file: exit %d\n%s", code, errs)
		}
		if code, _, errs := runCheck(t, "-h"); code != 0 || !strings.Contains(errs, "Usage: gateway check-config [-skip-secrets] FILE") {
			t.Errorf("-h: exit %d\n%s", code, errs)
		}
	})
}

// TestCheckConfigSkipSecrets: a configuration whose secrets live only in
// the pod (the chart's mount) checks outside it with -skip-secrets; without
// it the missing file is an error. A secret file outside the secret
// directories is an error either way.
func TestCheckConfigSkipSecrets(t *testing.T) {
	p := writeFile(t, "gw.yaml", `
endpoints:
  - name: plc
    url: opc.tcp://plc.example:4840
    identity: {username: op, password: {file: /etc/uagate/secrets/plc-password-not-here}}
`)
	if code, _, stderr := runCheck(t, p); code != 2 || !strings.Contains(stderr, "plc-password-not-here") {
		t.Errorf("without -skip-secrets: %d %s", code, stderr)
	}
	if code, stdout, stderr := runCheck(t, "-skip-secrets", p); code != 0 || !strings.HasPrefix(stdout, "ok: ") {
		t.Errorf("-skip-secrets: %d %s %s", code, stdout, stderr)
	}
	bad := writeFile(t, "bad.yaml", "endpoints: [{name: plc, url: 'opc.tcp://plc:4840', identity: {username: op, password: {file: /etc/passwd}}}]\n")
	if code, _, stderr := runCheck(t, "-skip-secrets", bad); code != 2 || !strings.Contains(stderr, "outside the secret directories") {
		t.Errorf("a secret file outside: %d %s", code, stderr)
	}
}
