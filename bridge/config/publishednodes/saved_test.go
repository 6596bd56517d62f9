package publishednodes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	_ "github.com/uagate/gateway/bridge/config/publishednodes" // registers the format
)

// TestSavePath: REST API changes to a gateway run on publishednodes.json go
// to the state directory, not into the file (the gateway does not rewrite
// OPC Publisher's format).
func TestSavePath(t *testing.T) {
	c := config.Default()
	c.Gateway.StateDir = t.TempDir()
	pn := filepath.Join(t.TempDir(), "publishednodes.json")
	if err := os.WriteFile(pn, []byte(`[{"EndpointUrl": "opc.tcp://plc:4840", "OpcNodes": [{"Id": "ns=2;s=A"}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(c.Gateway.StateDir, config.SavedName)
	if p := config.SavePath(pn, c); p != want {
		t.Errorf("publishednodes.json: SavePath %q, want %q", p, want)
	}
}
